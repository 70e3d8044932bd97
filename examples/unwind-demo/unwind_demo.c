/*
 * unwind-demo: a known call chain for DWARF-unwinding tests, built without frame pointers.
 *
 *   main -> outer -> middle -> hot_leaf      (about 85% of the CPU time)
 *   main -> sort_path -> qsort -> cmp_ints   (a callback called from libc, about 4%, 11% with msort)
 *
 * Usage: unwind_demo [SECONDS]   (default 2; the loop checks the clock between rounds)
 *
 * Built with -O2 -g -fomit-frame-pointer (see the Makefile): a frame-pointer walk cannot get
 * past hot_leaf, .eh_frame CFI can. Every function is noipa so that it stays a real frame, and
 * every call's result is used after it returns so that no call becomes a tail jump.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>

#define NOIPA __attribute__((noinline, noipa))

volatile uint64_t sink;

NOIPA uint64_t hot_leaf(uint64_t x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

NOIPA uint64_t middle(uint64_t x)
{
	return hot_leaf(x ^ 0x9e37) + 1;
}

NOIPA uint64_t outer(uint64_t x)
{
	return middle(x + 3) ^ 5;
}

NOIPA int cmp_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

NOIPA uint64_t sort_path(uint64_t seed)
{
	static int v[4096];
	for (int i = 0; i < 4096; i++) {
		seed = seed * 6364136223846793005ULL + 1;
		v[i] = (int)(seed >> 33);
	}
	qsort(v, 4096, sizeof v[0], cmp_ints);
	return (uint64_t)v[17] + 1;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	double end = now() + secs;
	uint64_t acc = 1;
	while (now() < end) {
		for (int i = 0; i < 100; i++)
			acc += outer(acc);
		acc += sort_path(acc);
	}
	sink = acc;
	printf("%llu\n", (unsigned long long)(acc & 0xff));
	return 0;
}
