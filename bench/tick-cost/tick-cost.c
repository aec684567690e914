/* What one profile sample costs the sampled program, timer interrupt included: a fixed busy
 * chunk (~100 us) timed many times; chunks a tick lands in take longer. Prints the trimmed mean
 * chunk time (chunks > 2x the median are preemptions by other processes, dropped) and the
 * number of chunks kept. Run bare and under `nesquic trace --probe profile:HZ`: the difference
 * in mean chunk time / (HZ x chunk time) is the cost per sample. bench/tick-cost/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long chunks = argc > 1 ? atol(argv[1]) : 20000;
	long iters = argc > 2 ? atol(argv[2]) : 100000;
	uint64_t *t = calloc(chunks, sizeof *t);
	volatile uint64_t x = 1;
	for (long c = 0; c < chunks; c++) {
		uint64_t start = now_ns();
		for (long i = 0; i < iters; i++)
			x = x * 6364136223846793005u + 1;
		t[c] = now_ns() - start;
	}
	qsort(t, chunks, sizeof *t, cmp);
	uint64_t median = t[chunks / 2];
	double sum = 0;
	long kept = 0;
	for (long c = 0; c < chunks; c++)
		if (t[c] <= 2 * median) {
			sum += t[c];
			kept++;
		}
	printf("{\"median_ns\":%llu,\"mean_ns\":%.1f,\"kept\":%ld,\"chunks\":%ld}\n", (unsigned long long)median,
	       sum / kept, kept, chunks);
	return 0;
}
