// SPDX-License-Identifier: GPL-2.0
/*
 * Test module for kprof-symbols: code in .text, .text.unlikely and .init.text, and an
 * inlined helper, so that relocation of every section and inline frames are exercised.
 */
#include <linux/init.h>
#include <linux/module.h>
#include <linux/kernel.h>

static u64 kprof_sink;

static inline u64 kprof_mix(u64 a, u64 b)
{
	return (a * 2654435761u) ^ (b >> 3); /* MIX_LINE */
}

noinline u64 kprof_hot(u64 n)
{
	u64 acc = 0, i;

	for (i = 0; i < n; i++)
		acc += kprof_mix(i, acc); /* HOT_LINE */
	return acc;
}
EXPORT_SYMBOL(kprof_hot);

noinline __cold u64 kprof_rare(u64 n)
{
	u64 acc = 1, i;

	for (i = 1; i < n; i++)
		acc = acc * 31 + i; /* RARE_LINE */
	return acc;
}
EXPORT_SYMBOL(kprof_rare);

static int __init kprof_testmod_init(void)
{
	u64 i, acc = 0;

	for (i = 0; i < 1000; i++)
		acc += i * i; /* INIT_LINE */
	kprof_sink = acc + kprof_hot(10) + kprof_rare(10);
	pr_info("kprof_testmod: %llu\n", kprof_sink);
	return 0;
}

static void __exit kprof_testmod_exit(void)
{
	kprof_sink = 0;
}

module_init(kprof_testmod_init);
module_exit(kprof_testmod_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kprof-symbols relocation test module");
