// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A relocatable object laid out like a kernel module (functions in .text, .text.unlikely and
 * .init.text, an inlined helper), cross-compiled for other architectures than the host's
 * kbuild can build for: its .rela.debug_* sections carry the same relocation types as a
 * module's (on aarch64 R_AARCH64_ABS64 and ABS32).
 */
#define __init __attribute__((section(".init.text"), noinline, used))

volatile unsigned long sink;

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	x ^= x >> 7;
	x *= 0x9e3779b97f4a7c15ul;
	return x ^ (x >> 13);
}

__attribute__((noinline)) unsigned long reloc_hot(unsigned long n)
{
	unsigned long acc = 0;

	while (n--)
		acc += mix(n + acc);
	sink = acc;
	return acc;
}

__attribute__((noinline, cold)) void reloc_rare(unsigned long why)
{
	sink = mix(why) + 3;
	sink += why * 7;
}

int __init reloc_init(void)
{
	sink = reloc_hot(1000);
	if (sink == 42)
		reloc_rare(sink);
	return 0;
}
