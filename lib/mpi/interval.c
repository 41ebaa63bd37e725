/* Automatic checkpoint interval (see interval.h). */
#include "interval.h"

#include <math.h>

double crpm_interval_daly(double cost_s, double mtbf_s)
{
    if (!(cost_s > 0) || !(mtbf_s > 0))
        return 0;
    if (cost_s >= 2 * mtbf_s)
        return mtbf_s;
    double r = cost_s / (2 * mtbf_s);
    double t = sqrt(2 * cost_s * mtbf_s) * (1 + sqrt(r) / 3 + r / 9) - cost_s;
    return t > 0 ? t : 0;
}

void crpm_interval_init(crpm_interval *iv, double mtbf_s)
{
    iv->mtbf_s = mtbf_s;
    iv->cost_s = 0;
    iv->interval_s = 0;
    iv->nsamples = 0;
}

double crpm_interval_update(crpm_interval *iv, double cost_s)
{
    if (!(cost_s >= 0) || isinf(cost_s))
        return iv->interval_s; /* a clock glitch must not poison the average */
    iv->cost_s = iv->nsamples ? iv->cost_s + CRPM_INTERVAL_ALPHA * (cost_s - iv->cost_s) : cost_s;
    iv->nsamples++;
    iv->interval_s = crpm_interval_daly(iv->cost_s, iv->mtbf_s);
    return iv->interval_s;
}

int crpm_interval_due(const crpm_interval *iv, double elapsed_s)
{
    return elapsed_s >= iv->interval_s;
}
