/* A function whose first instruction belongs to an inlined callee (issue 24, item 7): at -O2
 * `scan_ring` starts with `mix`'s arithmetic, so the line of its first instruction is in
 * `mix`; the report must show where `scan_ring` is declared. */
#include <stdlib.h>

static volatile unsigned long sink;

static inline unsigned long mix(unsigned long x)
{
	return (x * 2654435761u) ^ (x >> 13); /* MIX_BODY */
}

__attribute__((noinline)) unsigned long scan_ring(unsigned long seed, unsigned long n) /* SCAN_DECL */
{
	unsigned long acc = mix(seed);

	for (unsigned long i = 0; i < n; i++)
		acc = mix(acc + i);
	return acc;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 200000000;

	sink = scan_ring((unsigned long)argc, n);
	return 0;
}
