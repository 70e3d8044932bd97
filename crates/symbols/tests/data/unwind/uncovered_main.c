/* main and hot_leaf with unwind tables; mid (uncovered_mid.c) is built without any, as
 * hand-written assembly or -fno-asynchronous-unwind-tables code is. */
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) void hot_leaf(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
}

void mid(unsigned long n);

int main(int argc, char **argv)
{
	unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 1;
	for (unsigned long r = 0; r < rounds * 400; r++)
		mid(200000);
	return 0;
}
