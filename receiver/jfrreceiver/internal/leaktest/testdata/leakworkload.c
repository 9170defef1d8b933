// The native half of LeakWorkload.java: leak() mallocs and touches memory
// and makes global references that are never freed; work() does the same
// and frees them.
#include <jni.h>
#include <stdlib.h>
#include <string.h>

static void *touched(int bytes) {
	void *p = malloc((size_t)bytes);
	if (p != NULL) {
		memset(p, 0x5a, (size_t)bytes);
	}
	return p;
}

JNIEXPORT void JNICALL Java_LeakWorkload_leak(JNIEnv *env, jclass cls, jint bytes, jint refs) {
	(void)touched(bytes);
	jclass object = (*env)->FindClass(env, "java/lang/Object");
	jmethodID init = (*env)->GetMethodID(env, object, "<init>", "()V");
	for (jint i = 0; i < refs; i++) {
		jobject o = (*env)->NewObject(env, object, init);
		(void)(*env)->NewGlobalRef(env, o);
		(*env)->DeleteLocalRef(env, o);
	}
	(*env)->DeleteLocalRef(env, object);
}

JNIEXPORT void JNICALL Java_LeakWorkload_work(JNIEnv *env, jclass cls, jint bytes, jint refs) {
	free(touched(bytes));
	jclass object = (*env)->FindClass(env, "java/lang/Object");
	jmethodID init = (*env)->GetMethodID(env, object, "<init>", "()V");
	for (jint i = 0; i < refs; i++) {
		jobject o = (*env)->NewObject(env, object, init);
		jobject g = (*env)->NewGlobalRef(env, o);
		(*env)->DeleteLocalRef(env, o);
		(*env)->DeleteGlobalRef(env, g);
	}
	(*env)->DeleteLocalRef(env, object);
}
