// fixture.c builds the fixtures of usdt_test.go: executables with USDT
// probes in the form CPython's --with-dtrace builds have them (provider
// "python", semaphores, gc__start with the generation as its first
// argument), argument forms the parser must read (register, memory,
// constant), and functions named like CPython's GIL functions so that the
// probes attach to them. usdt-gcmain.elf also has gc_collect_main, which is
// preferred to the USDT probes. Rebuild with build.sh (needs gcc and
// systemtap-sdt-dev).
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short python_gc__start_semaphore __attribute__((section(".probes")));
unsigned short python_gc__done_semaphore __attribute__((section(".probes")));
unsigned short fixture_args_semaphore __attribute__((section(".probes")));

volatile long sink;

__attribute__((noinline)) void *PyEval_SaveThread(void) { sink++; return 0; }
__attribute__((noinline)) void PyEval_RestoreThread(void *t) { sink += (long)t; }

#ifdef WITH_GC_COLLECT_MAIN
__attribute__((noinline)) long gc_collect_main(void *tstate, int generation)
#else
__attribute__((noinline)) static long collect(int generation)
#endif
{
	long n = 0;
	if (python_gc__start_semaphore)
		STAP_PROBE1(python, gc__start, generation);
	for (int i = 0; i < generation * 1000; i++)
		n += sink;
	if (python_gc__done_semaphore)
		STAP_PROBE1(python, gc__done, n);
	return n;
}

// Unoptimised, so that the arguments are read from the stack.
__attribute__((noinline, optimize("O0"))) static void args(int a, long b)
{
	if (fixture_args_semaphore)
		STAP_PROBE3(fixture, args, a, b, 42);
}

int main(int argc, char **argv)
{
	PyEval_RestoreThread(PyEval_SaveThread());
#ifdef WITH_GC_COLLECT_MAIN
	sink = gc_collect_main(0, argc);
#else
	sink = collect(argc);
#endif
	args(argc, sink * 3);
	return (int)sink;
}
