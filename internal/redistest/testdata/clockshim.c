/*
 * clockshim: an LD_PRELOAD library that sets a process's wall clock back
 * (CLOCK_REALTIME, gettimeofday, time); monotonic clocks are left alone.
 * The offset, in microseconds behind the real clock (negative: ahead), is
 * the sum of two parts:
 *
 *   CLOCKSHIM_OFFSET_US    fixed for the process's life (read once);
 *   CLOCKSHIM_OFFSET_FILE  a file whose first 8 bytes hold a native-endian
 *                          int64, mapped once and read on every call: a
 *                          test steps the clock of a running process by
 *                          writing it (redistest.Clock, which stores it
 *                          atomically through its own mapping). A file
 *                          that cannot be mapped aborts the process.
 *
 * internal/redistest builds it with the C compiler (redistest.ClockShim)
 * and runs redis-servers under it: the failover suite a replica whose
 * clock is behind its master's, the Redlock tests a master whose clock
 * jumps while it runs.
 *
 * Debian's libfaketime 0.9.10 cannot be used for this: under Debian's
 * redis-server 7.0 it stops at start with "Cannot recover from unexpected
 * recursive calls to clock_gettime()" (jemalloc reads the clock before
 * libfaketime is initialised). This shim calls the kernel directly, never
 * dlsym or malloc, so it has no such recursion.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long fixed_us;         /* CLOCKSHIM_OFFSET_US */
static const long long *live_us;   /* the mapped CLOCKSHIM_OFFSET_FILE, or NULL */
static int ready;

/* init reads the environment once. Two threads that race here both map
 * the file: the same values, one mapping left over. */
static void init(void) {
	const char *s = getenv("CLOCKSHIM_OFFSET_US");
	const char *f = getenv("CLOCKSHIM_OFFSET_FILE");
	long long fixed = s ? atoll(s) : 0;
	const long long *live = NULL;
	if (f && *f) {
		int fd = open(f, O_RDONLY | O_CLOEXEC);
		void *p = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof(long long), PROT_READ, MAP_SHARED, fd, 0);
		if (fd >= 0) close(fd);
		if (p == MAP_FAILED) abort(); /* a clock the test cannot step: say so at once */
		live = p;
	}
	__atomic_store_n(&fixed_us, fixed, __ATOMIC_RELAXED);
	__atomic_store_n(&live_us, live, __ATOMIC_RELAXED);
	__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

static long long offset_us(void) {
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) init();
	const long long *live = __atomic_load_n(&live_us, __ATOMIC_RELAXED);
	return __atomic_load_n(&fixed_us, __ATOMIC_RELAXED) + (live ? __atomic_load_n(live, __ATOMIC_RELAXED) : 0);
}

static int is_realtime(clockid_t id) {
	return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int rc = (int)syscall(SYS_clock_gettime, id, ts);
	if (rc == 0 && ts && is_realtime(id)) {
		long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec - offset_us() * 1000LL;
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
	}
	return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
	struct timespec ts;
	int rc = clock_gettime(CLOCK_REALTIME, &ts);
	if (rc == 0 && tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	(void)tz;
	return rc;
}

time_t time(time_t *t) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
