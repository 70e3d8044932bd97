/* The unwinding test program of crates/symbols/tests/unwind.rs: a fixed call chain
 * main -> outer -> middle -> hot_leaf, and a qsort comparator (libc's qsort calls back
 * into cmp_ints), busy for about a second. Built with -O2 -g -fomit-frame-pointer, so only
 * DWARF CFI (.eh_frame) recovers the callers. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t hot_leaf(uint64_t n)
{
	uint64_t x = n;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

__attribute__((noinline)) uint64_t middle(uint64_t n)
{
	uint64_t r = hot_leaf(n) ^ n;
	sink = r;
	return r + 1;
}

__attribute__((noinline)) uint64_t outer(uint64_t n)
{
	uint64_t r = middle(n + 3);
	sink = r;
	return r * 3;
}

__attribute__((noinline)) int cmp_ints(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	for (int i = 0; i < 8; i++) {
		x = x * 2862933555777941757ULL + 3037000493ULL;
		y = y * 2862933555777941757ULL + 3037000493ULL;
	}
	return (x > y) - (x < y);
}

__attribute__((noinline)) void sort_some(uint64_t seed)
{
	static uint64_t v[4096];
	for (int i = 0; i < 4096; i++)
		v[i] = seed = seed * 6364136223846793005ULL + 1;
	qsort(v, 4096, sizeof v[0], cmp_ints);
	sink = v[0];
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	double end = now() + secs;
	uint64_t n = 1;
	while (now() < end) {
		for (int k = 0; k < 20; k++)
			n = outer(n);
		sort_some(n);
	}
	return (int)(sink & 1);
}
