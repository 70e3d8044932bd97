/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mychardrv's tracepoint: mychardrv:cache_traverse, one event per char_dev_cache_traverse()
 * call with the write's iteration number and the traversal's length in hops. Recorded by
 * `kprofctl run -e mychardrv:cache_traverse`, `perf record -e mychardrv:cache_traverse` or
 * tracefs; while nobody records it, the call site is a patched-out jump (static key).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM mychardrv

#if !defined(_MYCHARDRV_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _MYCHARDRV_TRACE_H

#include <linux/tracepoint.h>

TRACE_EVENT(cache_traverse,
	TP_PROTO(unsigned int iteration, unsigned int steps),
	TP_ARGS(iteration, steps),
	TP_STRUCT__entry(
		__field(unsigned int, iteration)
		__field(unsigned int, steps)
	),
	TP_fast_assign(
		__entry->iteration = iteration;
		__entry->steps = steps;
	),
	TP_printk("iteration=%u steps=%u", __entry->iteration, __entry->steps)
);

#endif /* _MYCHARDRV_TRACE_H */

/* define_trace.h includes this file again from the module's directory (-I$(src) in Kbuild). */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE mychardrv_trace
#include <trace/define_trace.h>
