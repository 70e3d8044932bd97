/* Two phases for the timeline tests: about SECONDS busy in phase_a(), then as long in
 * phase_b(), so that each half of a capture has its own top function. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void phase_a(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i * 3; /* phase_a hot */
}

__attribute__((noinline)) void phase_b(double seconds) {
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink ^= i * 7; /* phase_b hot */
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    phase_a(seconds);
    phase_b(seconds);
    return 0;
}
