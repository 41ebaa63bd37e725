#!/bin/bash
# Runs FTI's ITF suites with ITF's own engine (unchanged, from FTI's testing
# tree) and this directory's `fti` module, and records one line per case.
#
#   itf_driver.sh --fti-testing DIR --nranks N --results FILE [--sample K] [--match RE] suite.itf...
#
# --match: only the cases whose "function params" match the bash regex RE.
#
# Run it in an empty work directory (the suites' configuration names relative
# checkpoint directories).  Each case ends as one of
#   pass   the suite's checks passed, and every relaunch that succeeded after
#          a run that asked for a checkpoint and left it (it ended without
#          FTI_Finalize, or with keep_last_ckpt = 1) restarted from it (a
#          relaunch that started afresh instead proves nothing: a failure);
#   fail   a check failed (ITF's message), or a vacuous pass as above;
#   na     the case reads an FTI internal libcrpm has no equivalent for
#          (not_applicable.tsv, or found by the module while running);
#   skip   left out of a --sample run.
# Results: FILE gets "suite<TAB>function<TAB>params<TAB>result<TAB>reason".
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fti_testing='' nranks=16 results='' sample=0 match=''
suites=()
while [ $# -gt 0 ]; do
    case $1 in
    --fti-testing) fti_testing=$2; shift 2 ;;
    --nranks) nranks=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --sample) sample=$2; shift 2 ;;
    --match) match=$2; shift 2 ;;
    *) suites+=("$1"); shift ;;
    esac
done
[ -n "$fti_testing" ] && [ -n "$results" ] && [ ${#suites[@]} -gt 0 ] || {
    echo "usage: $0 --fti-testing DIR --nranks N --results FILE [--sample K] suite.itf..." >&2
    exit 2
}

export FTI_ITF_NRANKS=$nranks
export FTI_ITF_LAUNCH=$here/launch.py
export FTI_ITF_TEMPLATE=$fti_testing/testing/tools/itf/resources/fti_template.cfg
export FTI_ITF_STATE=$PWD/itf_case.state

set +u # ITF's engine reads unset variables
# shellcheck source=/dev/null
source "$fti_testing/testing/tools/itf/src/itf"
itf_cfg['core:module_path']=$here/modules
itf_cfg['core:verbose']='false'
itf_cfg['log:failed_cases']='false'

na_table=$here/not_applicable.tsv
declare -A drv=()

drv_suite_begin() {
    drv[suite]=$1
    drv[ntests]=${itf_state['ntests']}
    drv[index]=0
    printf '%s: %s cases\n' "$1" "${itf_state['ntests']}"
}

drv_static_na() {
    # $1 function, $2 params: the reason when not_applicable.tsv lists the case
    [ -f "$na_table" ] || return 1
    local s f re why
    while IFS=$'\t' read -r s f re why; do
        case $s in '#'* | '') continue ;; esac
        if [ "$s" == "${drv[suite]}" ] && { [ "$f" == '*' ] || [ "$f" == "$1" ]; } &&
            [[ " $2 " =~ $re ]]; then
            echo "$why"
            return 0
        fi
    done <"$na_table"
    return 1
}

drv_case_begin() {
    local fn=$1
    shift
    drv[fn]=$fn
    drv[params]="$*"
    rm -f "$FTI_ITF_STATE"
    : >"$FTI_ITF_STATE"
    local j=${drv[index]} n=${drv[ntests]} why
    drv[index]=$((j + 1))
    if { [ "$sample" -gt 0 ] && [ "$n" -gt "$sample" ] && [ $(((j * sample) % n)) -ge "$sample" ]; } ||
        { [ -n "$match" ] && [[ ! "$fn $*" =~ $match ]]; }; then
        echo "skip" >>"$FTI_ITF_STATE"
    elif why=$(drv_static_na "$fn" "$*"); then
        echo "na $why" >>"$FTI_ITF_STATE"
    fi
    # A case not run stops at its first program run (the module's fti_run
    # reads the state file).  The test function itself is left alone: the
    # suites find their programs through the file that defines it.
}

drv_record() {
    # $1 pass|fail (ITF's verdict), $2 ITF's message
    local verdict=$1 msg=$2 runs restarts
    if grep -q '^skip' "$FTI_ITF_STATE"; then
        verdict=skip msg=''
    elif grep -q '^na ' "$FTI_ITF_STATE"; then
        verdict=na
        msg=$(grep -m1 '^na ' "$FTI_ITF_STATE")
        msg=${msg#na }
    elif [ "$verdict" == 'pass' ]; then
        # A relaunch that succeeded without restarting, after a run that asked
        # for a checkpoint and ended without FTI_Finalize (a crash: its
        # checkpoints stay) or with keep_last_ckpt = 1, proves nothing about
        # recovery: a failure.
        local prev='' line n=0
        while read -r line; do
            n=$((n + 1))
            if [ -n "$prev" ] && [[ "$line" == *'rc=0 restart=0 '* ]] && [[ "$prev" == *'asked=1'* ]] &&
                [[ "$prev" == *'finalized=0'* || "$prev" == *'finalized=keep'* ]]; then
                verdict=fail
                msg="vacuous pass: run $n succeeded without restarting from the checkpoint run $((n - 1)) left"
                break
            fi
            prev=$line
        done < <(grep '^run ' "$FTI_ITF_STATE")
    fi
    msg=${msg//$'\n'/ }
    msg=${msg//$'\t'/ }
    printf '%s\t%s\t%s\t%s\t%s\n' "${drv[suite]}" "${drv[fn]}" "${drv[params]}" "$verdict" "$msg" >>"$results"
    [ "$verdict" == 'skip' ] || printf '  %-5s %s %s%s\n' "$verdict" "${drv[fn]}" "${drv[params]}" "${msg:+  ($msg)}"
}

drv_pass() { drv_record pass "$*"; }
drv_fail() { drv_record fail "$*"; }

itf_hook_subscribe 'onSuiteBegin' 'drv_suite_begin'
itf_hook_subscribe 'onTestRunBegin' 'drv_case_begin'
itf_hook_subscribe 'onTestPass' 'drv_pass'
itf_hook_subscribe 'onTestFail' 'drv_fail'

for s in "${suites[@]}"; do
    itf_run_suite "$s"
done
itf_exit
rm -f "$FTI_ITF_STATE"
exit 0
