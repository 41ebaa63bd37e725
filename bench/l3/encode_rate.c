/* Level-3 coding rates on one core (lib/levels/l3_code.c over ISA-L).
 *
 *   encode_rate [--mib N] [--reps R] [--out DIR]
 *
 * For group_size K = 4, 8 and l3_parity M = 1, 2 (k = K-M data units of
 * N MiB each, default 64), medians over R repetitions (default 5) of:
 *   encode  ec_encode_data of all k data units into the M parity units
 *           (a full re-encode), in GB/s of data;
 *   update  crpm_l3_update of a delta as long as every data unit into all M
 *           parity units (what a level-3 checkpoint costs the M holders
 *           together per byte written), in GB/s of delta; update_row is the
 *           same for one parity unit, the work of one holder;
 *   decode  crpm_l3_decoder_init + crpm_l3_decode rebuilding M lost data
 *           units from k survivors, in GB/s of rebuilt data.
 * GB = 1e9 bytes.  Prints a table, writes <out>/l3_encode.json. */
#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "../common/bench_util.h"
#include "crpm_types.h"
#include "l3_code.h"

static unsigned char *alloc_unit(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "encode_rate: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    fill_random(p, n);
    return p;
}

int main(int argc, char **argv)
{
    size_t mib = 64;
    int reps = 5;
    const char *out = "bench/results";
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--mib") && a + 1 < argc)
            mib = strtoul(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
            reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--out") && a + 1 < argc)
            out = argv[++a];
        else {
            fprintf(stderr, "usage: %s [--mib N] [--reps R] [--out DIR]\n", argv[0]);
            return 2;
        }
    }
    if (mib == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "encode_rate: --mib must be positive, --reps 1..100\n");
        return 2;
    }
    size_t len = mib << 20;
    char path[4200];
    snprintf(path, sizeof path, "%s/l3_encode.json", out);
    mkdir(out, 0777);
    FILE *js = fopen(path, "w");
    if (!js) {
        fprintf(stderr, "encode_rate: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(js, "{\n  \"benchmark\": \"level-3 coding rates, one core, ISA-L\",\n  \"mib_per_unit\": %zu,\n"
                "  \"reps\": %d,\n  \"unit\": \"GB/s (1e9 bytes): encode per data byte, update per delta byte, "
                "decode per rebuilt byte\",\n  \"results\": [\n", mib, reps);
    printf("level-3 coding, %zu MiB per unit, median of %d\n", mib, reps);
    printf("%3s %3s %12s %12s %14s %12s\n", "K", "M", "encode GB/s", "update GB/s", "update_row GB/s",
           "decode GB/s");

    static const int Ks[] = {4, 8}, Ms[] = {1, 2};
    int first = 1;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int K = Ks[a], M = Ms[b], k = K - M;
            crpm_l3_code c;
            if (crpm_l3_code_init(&c, k, M) != CRPM_SUCCESS) {
                fprintf(stderr, "encode_rate: %s\n", crpm_last_error());
                return 1;
            }
            unsigned char *data[8], *par[2], *rebuilt[2];
            for (int i = 0; i < k; i++)
                data[i] = alloc_unit(len);
            for (int h = 0; h < M; h++) {
                par[h] = alloc_unit(len);
                rebuilt[h] = alloc_unit(len);
            }
            double t_enc[100], t_upd[100], t_row[100], t_dec[100];
            int bad = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                ec_encode_data((int)len, k, M, c.tbls, data, par);
                t_enc[r] = now() - t0;

                /* the data units serve as deltas: the rate does not depend on the values */
                t0 = now();
                for (int i = 0; i < k; i++)
                    for (int h = 0; h < M; h++)
                        crpm_l3_update(&c, h, i, data[i], par[h], len);
                t_upd[r] = now() - t0;

                t0 = now();
                for (int i = 0; i < k; i++)
                    crpm_l3_update(&c, 0, i, data[i], par[0], len);
                t_row[r] = now() - t0;

                /* restore consistent parity, then lose data units 0..M-1 */
                crpm_l3_encode(&c, len, data, par);
                int avail[16];
                for (int u = 0; u < K; u++)
                    avail[u] = u >= M;
                t0 = now();
                crpm_l3_decoder d;
                if (crpm_l3_decoder_init(&d, &c, avail) != CRPM_SUCCESS) {
                    fprintf(stderr, "encode_rate: %s\n", crpm_last_error());
                    return 1;
                }
                unsigned char *in[8];
                for (int j = 0; j < k; j++)
                    in[j] = d.src[j] < k ? data[d.src[j]] : par[d.src[j] - k];
                crpm_l3_decode(&d, len, in, rebuilt);
                t_dec[r] = now() - t0;
                for (int j = 0; j < d.nlost; j++)
                    bad |= memcmp(rebuilt[j], data[d.lost[j]], len) != 0;
                crpm_l3_decoder_free(&d);
            }
            if (bad) {
                fprintf(stderr, "encode_rate: K %d M %d: decode did not rebuild the data\n", K, M);
                return 1;
            }
            double enc = (double)k * (double)len / median(t_enc, reps) / 1e9;
            double upd = (double)k * (double)len / median(t_upd, reps) / 1e9;
            double row = (double)k * (double)len / median(t_row, reps) / 1e9;
            double dec = (double)M * (double)len / median(t_dec, reps) / 1e9;
            printf("%3d %3d %12.2f %12.2f %14.2f %12.2f\n", K, M, enc, upd, row, dec);
            fprintf(js, "%s    {\"K\": %d, \"M\": %d, \"encode_gb_per_s\": %.3f, \"update_gb_per_s\": %.3f, "
                        "\"update_row_gb_per_s\": %.3f, \"decode_gb_per_s\": %.3f}",
                    first ? "" : ",\n", K, M, enc, upd, row, dec);
            first = 0;
            for (int i = 0; i < k; i++)
                free(data[i]);
            for (int h = 0; h < M; h++) {
                free(par[h]);
                free(rebuilt[h]);
            }
            crpm_l3_code_free(&c);
        }
    fprintf(js, "\n  ]\n}\n");
    if (fclose(js) != 0) {
        fprintf(stderr, "encode_rate: writing %s failed\n", path);
        return 1;
    }
    printf("results: %s\n", path);
    return 0;
}
