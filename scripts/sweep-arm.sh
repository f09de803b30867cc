#!/bin/sh
# A command arm for sweep checks: prints LCX_ITERATIONS lines of
# my/seconds, 1 with 1 % noise (seeded by the cell's run id, so that cells
# differ as measured ones do, the same on every host), FACTOR times faster
# from point FROM on (the point is $N). With SPIKES=p, each iteration is
# SPIKE times slower (default 4) with probability p: a preemption, a page
# fault storm, a neighbour's burst. Used by scripts/bench-sweep-crossover.sh
# and tests/integration/sweep.rs.
exec awk -v n="$N" -v from="${FROM:-999999}" -v f="${FACTOR:-1}" \
  -v it="$LCX_ITERATIONS" -v seed="$LCX_RUN_ID" -v spikes="${SPIKES:-0}" \
  -v spike="${SPIKE:-4}" 'BEGIN {
  srand(seed); speed = (n + 0 >= from + 0) ? f : 1;
  for (i = 1; i <= it; i++) {
    z = sqrt(-2 * log(rand() + 1e-12)) * cos(6.2831853 * rand());
    slow = (rand() < spikes + 0) ? spike : 1;
    printf("{\"iteration\": %d, \"my/seconds\": %.6f}\n", i, slow * (1 + 0.01 * z) / speed)
  } }'
