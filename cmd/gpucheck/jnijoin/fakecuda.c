// A stand-in for the CUDA driver library, for gpu-join.sh's dry run on a
// machine without a GPU: it checks the script's plumbing (the JVMs, the
// collector's configuration, the checker), not the GPU. The entry points
// gpuleak.c calls succeed; cuMemAlloc_v2 adds the bytes to this process's
// total and writes it to the file GPU_JOIN_FAKE_PROCESSES names, one
// "<pid> <bytes>" line per process, which the stub NVML library
// (receiver/nvmlreceiver/nvmlstubtest) reads as GPU 0's processes. Several
// processes share the file: each rewrites it under a lock, by rename.
//
// gcc -shared -fPIC -o libcuda.so.1 fakecuda.c
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

static unsigned long long total;
static CUdeviceptr next_ptr = 0x10000000ULL;

CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return 0; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&total; return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return 0; }
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) { (void)p; (void)v; (void)n; return 0; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
	const char *path = getenv("GPU_JOIN_FAKE_PROCESSES");
	total += bytes;
	*p = next_ptr;
	next_ptr += bytes;
	if (path == NULL) {
		return 0;
	}
	char lock[4096], tmp[4096];
	snprintf(lock, sizeof lock, "%s.lock", path);
	snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
	int l = open(lock, O_CREAT | O_RDWR, 0644);
	if (l < 0 || flock(l, LOCK_EX) != 0) {
		return 999;
	}
	FILE *in = fopen(path, "r");
	FILE *out = fopen(tmp, "w");
	if (out == NULL) {
		close(l);
		return 999;
	}
	unsigned int pid;
	unsigned long long b;
	while (in != NULL && fscanf(in, "%u %llu", &pid, &b) == 2) {
		if ((int)pid != (int)getpid()) {
			fprintf(out, "%u %llu\n", pid, b);
		}
	}
	if (in != NULL) {
		fclose(in);
	}
	fprintf(out, "%d %llu\n", (int)getpid(), total);
	fclose(out);
	rename(tmp, path);
	close(l);
	return 0;
}
