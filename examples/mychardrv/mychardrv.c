// SPDX-License-Identifier: GPL-2.0
/*
 * mychardrv - a misc character device whose writes are expensive in a known place.
 *
 * Writing a decimal N to /dev/mychardrv runs char_dev_cache_traverse() N times: each call
 * follows `hops` pointers of a randomly permuted singly linked cycle spread over `mib` MiB
 * of kvmalloc'd memory, one node per cache line, so nearly every hop misses the caches and
 * the TLB. Each iteration also calls char_dev_cache_checksum(), a cheap sequential scan of a
 * small cache-resident table, as a contrasting neighbour: it reads more words but a
 * profiler should put the traversal on top and the checksum far below it.
 *
 * Reading /dev/mychardrv waits for a simulated device first: every read() call starts a
 * `read_delay_ms` (default 20) high-resolution timer standing in for the device's interrupt and
 * sleeps until it completes (killable, so the reader shows in state D, as a driver waiting
 * for its hardware does), then serves the next bytes of a status text: the parameters and the
 * totals of the last write. An off-CPU profile puts reads x read_delay_ms under
 * mychardrv_read(); `dd if=/dev/mychardrv bs=1 count=N` makes N reads. read_delay_ms=0 skips
 * the wait.
 *
 * Writing can hold the device too: with `write_hold_ms` set (default 0: no hold), every write()
 * keeps dev.lock for that many ms after its traversals, asleep in mychardrv_hold_device(), as a
 * driver keeps its lock across a slow device command. Two concurrent writers then wait on the
 * mutex (lock:contention_begin/end) for a known time, and the latency of mychardrv_write() for
 * `echo 1 > /dev/mychardrv` is about write_hold_ms.
 *
 * Each traversal is also the tracepoint mychardrv:cache_traverse (mychardrv_trace.h): with
 * `-e mychardrv:cache_traverse` a capture shows every call on the timeline with its fields.
 *
 * This is the kprof example module (the Streamline "mychardrv" walk-through, redone for
 * perf_event sampling). It is built with debug info so that samples resolve to lines.
 */
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#define CREATE_TRACE_POINTS
#include "mychardrv_trace.h"

#define MYCHARDRV_NAME "mychardrv"
/* A node fills one 64-byte cache line, so consecutive hops never share a line. */
#define MYCHARDRV_NODE_SIZE 64
#define MYCHARDRV_CHECKSUM_WORDS 512
/* Upper bound on N so a typo cannot wedge the board for hours. */
#define MYCHARDRV_MAX_ITERATIONS 10000000U

static unsigned int mib = 8;
module_param(mib, uint, 0444);
MODULE_PARM_DESC(mib, "Size of the pointer-chasing structure in MiB (default 8)");

static unsigned int hops = 256;
module_param(hops, uint, 0644);
MODULE_PARM_DESC(hops, "Pointers followed per char_dev_cache_traverse() call (default 256)");

static unsigned int seed = 0x6b70726f;
module_param(seed, uint, 0444);
MODULE_PARM_DESC(seed, "Seed of the permutation, fixed so that runs are comparable");

static unsigned int read_delay_ms = 20;
module_param(read_delay_ms, uint, 0644);
MODULE_PARM_DESC(read_delay_ms, "Simulated device latency of each read() in ms (default 20, 0: none)");

static unsigned int write_hold_ms;
module_param(write_hold_ms, uint, 0644);
MODULE_PARM_DESC(write_hold_ms, "Time each write() holds the device lock in ms (default 0: none)");

/* value first: on 32-bit Arm (AEABI) a u64 after a 4-byte pointer is padded to offset 8. */
struct mychardrv_node {
	u64 value;
	struct mychardrv_node *next;
	u8 pad[MYCHARDRV_NODE_SIZE - sizeof(u64) - sizeof(void *)];
};

static_assert(sizeof(struct mychardrv_node) == MYCHARDRV_NODE_SIZE);

struct mychardrv {
	struct mutex lock; /* serializes writers: the cursor and totals are shared */
	struct mychardrv_node *nodes;
	size_t nr_nodes;
	struct mychardrv_node *cursor;
	u64 table[MYCHARDRV_CHECKSUM_WORDS];
	u64 last_iterations;
	u64 last_result;
	u64 total_iterations;
};

static struct mychardrv dev;

/* xorshift32: deterministic, so the same seed gives the same layout on every boot. */
static u32 mychardrv_next_random(u32 *state)
{
	u32 x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}

/*
 * Links every node into one cycle in a random order (Fisher-Yates shuffle of the indices),
 * so a walk visits all of the memory with no spatial locality.
 */
static int mychardrv_build_cycle(struct mychardrv *d)
{
	u32 *order;
	u32 state = seed ? seed : 1;
	size_t i;

	order = kvmalloc_array(d->nr_nodes, sizeof(*order), GFP_KERNEL);
	if (!order)
		return -ENOMEM;
	for (i = 0; i < d->nr_nodes; i++)
		order[i] = i;
	for (i = d->nr_nodes - 1; i > 0; i--) {
		size_t j = mychardrv_next_random(&state) % (i + 1);

		swap(order[i], order[j]);
	}
	for (i = 0; i < d->nr_nodes; i++) {
		struct mychardrv_node *node = &d->nodes[order[i]];

		node->next = &d->nodes[order[(i + 1) % d->nr_nodes]];
		node->value = mychardrv_next_random(&state);
	}
	d->cursor = &d->nodes[order[0]];
	kvfree(order);

	for (i = 0; i < MYCHARDRV_CHECKSUM_WORDS; i++)
		d->table[i] = mychardrv_next_random(&state);
	return 0;
}

/*
 * The hot spot: a dependent chain of loads, each one a cache (and mostly TLB) miss. Kept out
 * of line and unclonable (no .constprop copy) so that profiles name it as written.
 */
static noinline __noclone u64 char_dev_cache_traverse(struct mychardrv *d, unsigned int steps)
{
	struct mychardrv_node *node = d->cursor;
	u64 sum = 0;

	while (steps--) {
		sum += node->value;
		node = node->next;
	}
	d->cursor = node;
	/*
	 * Yield between batches here rather than in the caller: the call also makes this a
	 * non-leaf function, so GCC (before 14, whatever -mno-omit-leaf-frame-pointer says) gives
	 * it a frame and a sample in the loop unwinds through mychardrv_write().
	 */
	cond_resched();
	return sum;
}

/*
 * The cheap neighbour: sequential passes over a small table that stays in L1. It reads eight
 * times as many words as the traversal follows pointers, yet costs a small fraction of it,
 * because every read hits the cache (and, under QEMU TCG, the soft TLB).
 *
 * It is also the leaf without a frame that every kernel has many of (GCC gives x86 leaves
 * none; arm64 assembly routines have none): it saves no frame pointer and, on arm64, keeps
 * its return address in LR. A frame-pointer unwinder then skips mychardrv_write() in its
 * call chain; a profiler must still name that caller (ORC on x86, the sampled LR on arm64).
 * omit-frame-pointer makes arm64's GCC, which otherwise gives leaves a frame record under
 * the kernel's -fno-omit-frame-pointer, build it the way x86's GCC does.
 */
static noinline __noclone __attribute__((optimize("omit-frame-pointer"))) u64
char_dev_cache_checksum(const struct mychardrv *d, unsigned int steps)
{
	unsigned int words = steps * 8;
	u64 sum = 0;
	unsigned int i;

	for (i = 0; i < words; i++)
		sum ^= d->table[i % MYCHARDRV_CHECKSUM_WORDS] + i;
	return sum;
}

/*
 * Holds the device for `ms` while the caller keeps dev.lock (write_hold_ms). A killable sleep
 * on a high-resolution timer with no slack, so that it ends close to `ms` even under QEMU TCG:
 * msleep() (and fsleep() above 20 ms, which is msleep()) rounds up to whole jiffies plus one,
 * up to 24 ms for 20 at HZ=250 and 30 at HZ=100; usleep_range() cannot be killed, and a large
 * write_hold_ms must not make the writer unkillable. Out of line so that probes and profiles
 * name it.
 */
static noinline int mychardrv_hold_device(unsigned int ms)
{
	ktime_t end = ktime_add_ms(ktime_get(), ms);

	for (;;) {
		set_current_state(TASK_KILLABLE);
		/* 0: expired. Woken early: a fatal signal ends the hold, anything else sleeps on. */
		if (!schedule_hrtimeout(&end, HRTIMER_MODE_ABS))
			return 0;
		if (fatal_signal_pending(current))
			return -EINTR;
	}
}

static ssize_t mychardrv_write(struct file *file, const char __user *buf, size_t len,
			       loff_t *ppos)
{
	unsigned int iterations, i, steps, hold_ms;
	u64 result = 0;
	int ret;

	ret = kstrtouint_from_user(buf, len, 0, &iterations);
	if (ret)
		return ret;
	if (iterations > MYCHARDRV_MAX_ITERATIONS)
		return -EINVAL;
	if (mutex_lock_interruptible(&dev.lock))
		return -EINTR;

	steps = READ_ONCE(hops);
	for (i = 0; i < iterations; i++) {
		result += char_dev_cache_traverse(&dev, steps);
		trace_cache_traverse(i, steps);
		result ^= char_dev_cache_checksum(&dev, steps);
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
	}
	dev.last_iterations = i;
	dev.last_result = result;
	dev.total_iterations += i;
	hold_ms = READ_ONCE(write_hold_ms);
	if (!ret && hold_ms)
		ret = mychardrv_hold_device(hold_ms);
	mutex_unlock(&dev.lock);
	return ret ? ret : len;
}

/* One request to the simulated device: its "interrupt" (the timer) completes it. */
struct mychardrv_request {
	struct hrtimer timer;
	struct completion done;
};

static enum hrtimer_restart mychardrv_device_irq(struct hrtimer *timer)
{
	struct mychardrv_request *req = container_of(timer, struct mychardrv_request, timer);

	complete(&req->done);
	return HRTIMER_NORESTART;
}

/*
 * Waits `delay_ms` for the simulated device. A high-resolution timer rather than a timer_list:
 * jiffies would round 20 ms up to the next tick (4 ms at HZ=250) and blur the known total.
 * Kept out of line so that profiles name it between mychardrv_read() and the scheduler.
 */
static noinline int mychardrv_wait_device(unsigned int delay_ms)
{
	struct mychardrv_request req;
	int ret;

	init_completion(&req.done);
	hrtimer_init_on_stack(&req.timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	req.timer.function = mychardrv_device_irq;
	hrtimer_start(&req.timer, ms_to_ktime(delay_ms), HRTIMER_MODE_REL);
	ret = wait_for_completion_killable(&req.done);
	/* Killed before the device answered: the timer must not fire into a dead stack frame. */
	hrtimer_cancel(&req.timer);
	destroy_hrtimer_on_stack(&req.timer);
	return ret;
}

static ssize_t mychardrv_read(struct file *file, char __user *buf, size_t len, loff_t *ppos)
{
	unsigned int delay_ms = READ_ONCE(read_delay_ms);
	char text[192];
	int n;

	if (delay_ms && mychardrv_wait_device(delay_ms))
		return -EINTR;
	if (mutex_lock_interruptible(&dev.lock))
		return -EINTR;
	n = scnprintf(text, sizeof(text),
		      "mib=%u nodes=%zu hops=%u last_iterations=%llu last_result=%#llx total_iterations=%llu\n",
		      mib, dev.nr_nodes, READ_ONCE(hops), dev.last_iterations, dev.last_result,
		      dev.total_iterations);
	mutex_unlock(&dev.lock);
	return simple_read_from_buffer(buf, len, ppos, text, n);
}

static const struct file_operations mychardrv_fops = {
	.owner = THIS_MODULE,
	.read = mychardrv_read,
	.write = mychardrv_write,
	.llseek = default_llseek,
};

static struct miscdevice mychardrv_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = MYCHARDRV_NAME,
	.fops = &mychardrv_fops,
	.mode = 0600,
};

static int __init mychardrv_init(void)
{
	int ret;

	if (mib == 0 || mib > 1024) {
		pr_err(MYCHARDRV_NAME ": mib=%u out of range 1..1024\n", mib);
		return -EINVAL;
	}
	mutex_init(&dev.lock);
	dev.nr_nodes = (size_t)mib * SZ_1M / sizeof(struct mychardrv_node);
	dev.nodes = kvmalloc_array(dev.nr_nodes, sizeof(*dev.nodes), GFP_KERNEL | __GFP_ZERO);
	if (!dev.nodes)
		return -ENOMEM;
	ret = mychardrv_build_cycle(&dev);
	if (ret)
		goto err_free;
	ret = misc_register(&mychardrv_misc);
	if (ret)
		goto err_free;
	pr_info(MYCHARDRV_NAME ": /dev/%s ready, %u MiB, %zu nodes, %u hops per traversal\n",
		MYCHARDRV_NAME, mib, dev.nr_nodes, hops);
	return 0;

err_free:
	kvfree(dev.nodes);
	return ret;
}

static void __exit mychardrv_exit(void)
{
	misc_deregister(&mychardrv_misc);
	kvfree(dev.nodes);
}

module_init(mychardrv_init);
module_exit(mychardrv_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("kprof developers");
MODULE_DESCRIPTION("Example driver with a cache-hostile hot spot for kprof profiling");
MODULE_VERSION("1.0");
