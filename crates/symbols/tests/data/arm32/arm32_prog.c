// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A 32-bit Arm program for the symbol and disassembly tests, built -mthumb and -marm: a loop
 * with an inlined helper, a switch the compiler makes a jump table of (data in the code, `$d`),
 * a conditional (an IT block in Thumb) and a 64-bit multiply with a literal pool.
 */
volatile int sink;
static int table[64];

static inline int helper(int x)
{
	return table[x & 63] * 3 + x;
}

__attribute__((noinline)) int traverse(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += helper(i);
	return s;
}

__attribute__((noinline)) int pick(int k)
{
	switch (k) {
	case 0: return sink + 11;
	case 1: return sink * 7;
	case 2: return sink - 5;
	case 3: return sink ^ 0x55;
	case 4: return sink << 3;
	case 5: return sink | 0x1000;
	case 6: return -sink;
	default: return 0;
	}
}

__attribute__((noinline)) int distance(int a, int b)
{
	return a > b ? a - b : b - a;
}

__attribute__((noinline)) unsigned long long scramble(unsigned long long x)
{
	return (x ^ (x >> 29)) * 0x9e3779b97f4a7c15ull;
}

int main(int argc, char **argv)
{
	(void)argv;
	for (int i = 0; i < 64; i++)
		table[i] = i * argc;
	sink = traverse(argc * 100) + pick(argc) + distance(argc, 3) + (int)scramble(argc);
	return 0;
}
