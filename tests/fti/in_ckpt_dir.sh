#!/bin/sh
# Runs "$@" in $CRPM_CKPT_DIR (the crash driver's per-trial directory), so
# that the relative ckpt_dir/glbl_dir of an FTI configuration, as FTI users
# write them (./Local, ./Global), land in the trial's directory.
mkdir -p "$CRPM_CKPT_DIR" && cd "$CRPM_CKPT_DIR" && exec "$@"
