/* SPDX-License-Identifier: MIT */
/*
 * kprof/marker.h - mark what a program is doing, for kprof's timeline and `--time`.
 *
 *   kprof_mark("frame 12 start");          a point in time
 *   kprof_markf("frame %d start", n);      the same, printf-style
 *   kprof_mark_begin("decode");            a named span on this thread ...
 *   kprof_mark_end("decode");              ... until here
 *
 * Each call is one write(2) of one line to tracefs' trace_marker, which
 * `kprof-agent record --markers` records with the time, CPU and thread (docs/markers.md).
 * Spans are written in atrace's text form, "B|PID|NAME" and "E|PID|NAME", which Perfetto
 * reads as well. A line is at most KPROF_MARK_MAX bytes; longer text is cut.
 *
 * The file is opened once, on the first mark, and kept open. Where tracefs is missing or not
 * writable (no CONFIG_FTRACE, not mounted, not root) every call does nothing and returns -1;
 * a program never fails because it is not being profiled. Safe from any thread; not
 * async-signal-safe on the first call (it opens the file). Define KPROF_MARKER_DISABLE to
 * compile the calls out. Header only: nothing to link. C99 or later (GCC, Clang), C++ too.
 *
 * Copyright (c) 2026 the kprof authors. Permission is hereby granted, free of charge, to any
 * person obtaining a copy of this software and associated documentation files (the
 * "Software"), to deal in the Software without restriction, including without limitation the
 * rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of
 * the Software, and to permit persons to whom the Software is furnished to do so, subject to
 * the following conditions: The above copyright notice and this permission notice shall be
 * included in all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED
 * "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE
 * WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO
 * EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 * LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
 * CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
 */
#ifndef KPROF_MARKER_H
#define KPROF_MARKER_H

/* Linux 6.1 keeps 1 KiB of one trace_marker write (later kernels 4 KiB): lines stay under it. */
#define KPROF_MARK_MAX 1024

#ifdef KPROF_MARKER_DISABLE

#define kprof_mark(text) ((void)(text), -1)
#define kprof_markf(...) (-1)
#define kprof_mark_begin(name) ((void)(name), -1)
#define kprof_mark_end(name) ((void)(name), -1)

#else

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Strict -std=c99 hides O_CLOEXEC; the descriptor then leaks into exec'd children. */
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/*
 * The trace_marker descriptor: -2 before the first mark, -1 when there is none. One per
 * translation unit that marks (the function is static), so a program opens the file at most
 * once per source file that marks. KPROF_TRACE_MARKER in the environment names another file
 * (tracefs mounted elsewhere; tests).
 */
static inline int kprof__fd(void)
{
	static int fd = -2;
	int f = __atomic_load_n(&fd, __ATOMIC_ACQUIRE);

	if (f == -2) {
		static const char *const paths[] = {
			"/sys/kernel/tracing/trace_marker",
			"/sys/kernel/debug/tracing/trace_marker",
		};
		const char *env = getenv("KPROF_TRACE_MARKER");
		int expected = -2;
		int n = -1;
		unsigned i;

		if (env && *env)
			n = open(env, O_WRONLY | O_CLOEXEC);
		for (i = 0; !env && n < 0 && i < sizeof(paths) / sizeof(paths[0]); i++)
			n = open(paths[i], O_WRONLY | O_CLOEXEC);
		/* Another thread may have opened it meanwhile: keep one descriptor. */
		if (__atomic_compare_exchange_n(&fd, &expected, n, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			f = n;
		} else {
			if (n >= 0)
				close(n);
			f = expected;
		}
	}
	return f;
}

/* Writes one line (the kernel adds the newline); 0 when written, -1 when not. */
static inline int kprof__write(const char *line, size_t len)
{
	int fd = kprof__fd();

	if (fd < 0)
		return -1;
	if (len > KPROF_MARK_MAX - 1)
		len = KPROF_MARK_MAX - 1;
	return write(fd, line, len) < 0 ? -1 : 0;
}

/* A point in time: TEXT as it is. */
static inline int kprof_mark(const char *text)
{
	return kprof__write(text, strlen(text));
}

/* A point in time, printf-style. */
__attribute__((format(printf, 1, 2))) static inline int kprof_markf(const char *fmt, ...)
{
	char line[KPROF_MARK_MAX];
	va_list ap;
	int n;

	if (kprof__fd() < 0)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	return kprof__write(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Begin (B) or end (E) of the span NAME on the calling thread, in atrace's form. */
static inline int kprof__edge(char edge, const char *name)
{
	char line[KPROF_MARK_MAX];
	int n;

	if (kprof__fd() < 0)
		return -1;
	n = snprintf(line, sizeof(line), "%c|%d|%s", edge, (int)getpid(), name);
	if (n < 0)
		return -1;
	return kprof__write(line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* The span NAME starts on this thread. */
static inline int kprof_mark_begin(const char *name)
{
	return kprof__edge('B', name);
}

/* The span NAME ends on this thread. */
static inline int kprof_mark_end(const char *name)
{
	return kprof__edge('E', name);
}

#ifdef __cplusplus
}
#endif

#endif /* KPROF_MARKER_DISABLE */
#endif /* KPROF_MARKER_H */
