// The native half of GpuLeak.java. The CUDA driver library is opened at run
// time (dlopen), so that this builds with gcc and the JDK's jni.h alone, on
// a machine without the CUDA toolkit; the few driver entry points it calls
// are declared here as the driver API documents them.
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

static CUresult (*cu_init)(unsigned int);
static CUresult (*cu_device_get)(CUdevice *, int);
static CUresult (*cu_primary_ctx_retain)(CUcontext *, CUdevice);
static CUresult (*cu_ctx_set_current)(CUcontext);
static CUresult (*cu_mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*cu_memset)(CUdeviceptr, unsigned char, size_t);
static CUcontext context;

static void fail(JNIEnv *env, const char *what, CUresult r) {
	char msg[256];
	snprintf(msg, sizeof msg, "%s failed: CUresult %d", what, r);
	jclass e = (*env)->FindClass(env, "java/lang/IllegalStateException");
	(*env)->ThrowNew(env, e, msg);
}

static int resolve(JNIEnv *env, void *lib, const char *name, void **fn) {
	*fn = dlsym(lib, name);
	if (*fn == NULL) {
		jclass e = (*env)->FindClass(env, "java/lang/IllegalStateException");
		(*env)->ThrowNew(env, e, name);
		return 0;
	}
	return 1;
}

JNIEXPORT void JNICALL Java_GpuLeak_init(JNIEnv *env, jclass cls, jint ordinal) {
	(void)cls;
	const char *path = getenv("GPU_JOIN_CUDA_LIBRARY");
	void *lib = dlopen(path != NULL && path[0] != '\0' ? path : "libcuda.so.1", RTLD_NOW);
	if (lib == NULL) {
		jclass e = (*env)->FindClass(env, "java/lang/IllegalStateException");
		(*env)->ThrowNew(env, e, dlerror());
		return;
	}
	if (!resolve(env, lib, "cuInit", (void **)&cu_init) || !resolve(env, lib, "cuDeviceGet", (void **)&cu_device_get) ||
	    !resolve(env, lib, "cuDevicePrimaryCtxRetain", (void **)&cu_primary_ctx_retain) ||
	    !resolve(env, lib, "cuCtxSetCurrent", (void **)&cu_ctx_set_current) ||
	    !resolve(env, lib, "cuMemAlloc_v2", (void **)&cu_mem_alloc) || !resolve(env, lib, "cuMemsetD8_v2", (void **)&cu_memset)) {
		return;
	}
	CUresult r;
	CUdevice dev;
	if ((r = cu_init(0)) != 0) {
		fail(env, "cuInit", r);
	} else if ((r = cu_device_get(&dev, ordinal)) != 0) {
		fail(env, "cuDeviceGet", r);
	} else if ((r = cu_primary_ctx_retain(&context, dev)) != 0) {
		fail(env, "cuDevicePrimaryCtxRetain", r);
	}
}

// leak allocates bytes of device memory (written, so that it is backed)
// and pins refs new objects with global references, and frees neither.
JNIEXPORT void JNICALL Java_GpuLeak_leak(JNIEnv *env, jclass cls, jlong bytes, jint refs) {
	(void)cls;
	CUresult r;
	CUdeviceptr p;
	// Each calling thread makes the primary context current.
	if ((r = cu_ctx_set_current(context)) != 0) {
		fail(env, "cuCtxSetCurrent", r);
		return;
	}
	if (bytes > 0) {
		if ((r = cu_mem_alloc(&p, (size_t)bytes)) != 0) {
			fail(env, "cuMemAlloc", r);
			return;
		}
		if ((r = cu_memset(p, 0x5a, (size_t)bytes)) != 0) {
			fail(env, "cuMemsetD8", r);
			return;
		}
	}
	jclass object = (*env)->FindClass(env, "java/lang/Object");
	jmethodID ctor = (*env)->GetMethodID(env, object, "<init>", "()V");
	for (jint i = 0; i < refs; i++) {
		jobject o = (*env)->NewObject(env, object, ctor);
		(void)(*env)->NewGlobalRef(env, o);
		(*env)->DeleteLocalRef(env, o);
	}
	(*env)->DeleteLocalRef(env, object);
}
