/* Automatic checkpoint interval (ckpt_interval_s = auto): the interval that
 * minimises the expected time lost to checkpoints and failures, from the
 * measured cost of recent checkpoints and the system's mean time between
 * failures (MTBF).  Pure: no MPI, no clock.  The caller agrees on the cost
 * across ranks (the maximum) before feeding it here, so every rank computes
 * the same interval. */
#ifndef CRPM_INTERVAL_H
#define CRPM_INTERVAL_H

typedef struct crpm_interval {
    double mtbf_s;      /* mean time between failures (> 0) */
    double cost_s;      /* smoothed checkpoint cost; valid when nsamples > 0 */
    double interval_s;  /* current interval; 0 = checkpoint at the next chance */
    unsigned long nsamples;
} crpm_interval;

/* Weight of a new cost sample in the exponential moving average: recent
 * checkpoints dominate (the cost falls after the first ones, which fill the
 * containers, and follows the application's write rate) while one slow
 * checkpoint moves the interval only by about a tenth. */
#define CRPM_INTERVAL_ALPHA 0.25

/* Daly's higher-order estimate of the optimum compute time between
 * checkpoints, for checkpoint cost c and MTBF m (seconds):
 *   c < 2m:  sqrt(2cm) * (1 + sqrt(c/2m)/3 + (c/2m)/9) - c
 *   else:    m
 * For c << m it is Young's sqrt(2cm). */
double crpm_interval_daly(double cost_s, double mtbf_s);

/* No sample yet: interval 0, i.e. the first checkpoint is taken at the first
 * opportunity to measure the cost. */
void crpm_interval_init(crpm_interval *iv, double mtbf_s);

/* Adds the cost of one checkpoint (seconds, >= 0) and returns the new
 * interval.  The first sample is taken as is; later ones are averaged with
 * weight CRPM_INTERVAL_ALPHA. */
double crpm_interval_update(crpm_interval *iv, double cost_s);

/* 1 when `elapsed_s` seconds since the end of the last checkpoint reach the
 * interval. */
int crpm_interval_due(const crpm_interval *iv, double elapsed_s);

#endif
