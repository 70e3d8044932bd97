/* Test workload for the report tests: functions with distinct, known shares of CPU time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t hot_loop(uint64_t n)
{
	uint64_t acc = 0;
	for (uint64_t i = 0; i < n; i++)
		acc += (i * 2654435761u) ^ (acc >> 3); /* HOT_LINE */
	return acc;
}

__attribute__((noinline)) uint64_t warm_loop(uint64_t n)
{
	uint64_t acc = 1;
	for (uint64_t i = 0; i < n; i++)
		acc = acc * 6364136223846793005u + i;
	return acc;
}

__attribute__((noinline)) uint64_t cool_loop(uint64_t n)
{
	uint64_t acc = 7;
	for (uint64_t i = 0; i < n; i++)
		acc ^= (acc << 13) + i;
	return acc;
}

__attribute__((noinline)) uint64_t cold_loop(uint64_t n)
{
	uint64_t acc = 3;
	for (uint64_t i = 0; i < n; i++)
		acc += acc / (i | 1);
	return acc;
}

__attribute__((noinline)) void driver(uint64_t scale)
{
	sink += hot_loop(8 * scale);
	sink += warm_loop(4 * scale);
	sink += cool_loop(2 * scale);
	sink += cold_loop(scale / 4);
}

int main(int argc, char **argv)
{
	uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 0) : 40;
	for (uint64_t r = 0; r < rounds; r++)
		driver(1000000);
	printf("%llu\n", (unsigned long long)sink);
	return 0;
}
