/*
 * nvmlstub.c: a stand-in for libnvidia-ml.so.1 with scripted values, so the
 * nvml receiver's real path (go-nvml's dlopen, cgo calls, struct layouts)
 * runs in tests on machines without a GPU. It implements only the subset of
 * the NVML C API the receiver calls, compiled against go-nvml's own nvml.h
 * so every struct matches the real library's.
 *
 * Scripted node: two GPUs. GPU 0 runs one compute process, the calling
 * process itself (getpid()), holding 2 GiB; GPU 1 is idle. The first event
 * wait delivers XID 13 on GPU 1; later waits time out.
 *
 * nvmlDeviceGetProcessUtilization is left out on purpose, as older drivers
 * lack some functions: the receiver must look symbols up before calling them
 * (a missing one would end the process with "undefined symbol").
 *
 * If NVML_STUB_LOG names a file, every nvmlInit/nvmlShutdown appends a line
 * to it, so a test can check the two are balanced.
 *
 * If NVML_STUB_PROCESSES names a file, GPU 0's compute processes are read
 * from it at each call instead: one "<pid> <bytes>" line per process (at
 * most STUB_MAX_PROCESSES), so that a test scripts per-process GPU memory
 * over time.
 *
 * Build: nvmlstubtest.Build, or
 * gcc -shared -fPIC -I<go-nvml>/pkg/nvml -o libnvidia-ml.so.1 nvmlstub.c
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nvml.h"

#define GIB (1024ULL * 1024ULL * 1024ULL)
#define MIB (1024ULL * 1024ULL)
#define NUM_GPUS 2
#define STUB_MAX_PROCESSES 16

struct nvmlDevice_st {
	unsigned int index;
};
struct nvmlEventSet_st {
	int waits;
};

static struct nvmlDevice_st gpus[NUM_GPUS] = {{0}, {1}};
static struct nvmlEventSet_st event_set;
static unsigned long long sample_clock = 1000000ULL;

static void stub_log(const char *what) {
	const char *path = getenv("NVML_STUB_LOG");
	if (path == NULL) {
		return;
	}
	FILE *f = fopen(path, "a");
	if (f != NULL) {
		fprintf(f, "%s\n", what);
		fclose(f);
	}
}

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src) {
	if (dst == NULL || strlen(src) + 1 > length) {
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	strcpy(dst, src);
	return NVML_SUCCESS;
}

/* go-nvml's nvml.h wraps each handle in a one-pointer struct; the ABI is
 * that of the pointer. */
static int valid(nvmlDevice_t device) {
	return device.handle == &gpus[0] || device.handle == &gpus[1];
}

nvmlReturn_t nvmlInit_v2(void) {
	stub_log("init");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

nvmlReturn_t nvmlShutdown(void) {
	stub_log("shutdown");
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
	switch (result) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_TIMEOUT: return "Timeout";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	return copy_string(version, length, "570.86.15-stub");
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	*count = NUM_GPUS;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
	if (index >= NUM_GPUS) {
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	device->handle = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
	if (!valid(device)) {
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	return copy_string(uuid, length, device.handle->index == 0 ? "GPU-5a17b0c2-0000-4000-8000-000000000000"
	                                                    : "GPU-5a17b0c2-0000-4000-8000-000000000001");
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
	return copy_string(name, length, "NVIDIA H200 (stub)");
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
	*minor = device.handle->index;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
	memset(pci, 0, sizeof(*pci));
	pci->bus = 0x18 + device.handle->index;
	snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
	return NVML_SUCCESS;
}

static unsigned long long used_bytes(nvmlDevice_t device) {
	return device.handle->index == 0 ? 2 * GIB : 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
	if (memory->version != nvmlMemory_v2) {
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	}
	memory->total = 141 * GIB;
	memory->reserved = 600 * MIB;
	memory->used = used_bytes(device);
	memory->free = memory->total - memory->reserved - memory->used;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
	memory->total = 141 * GIB;
	memory->used = used_bytes(device) + 600 * MIB;
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

/* Two new samples per call: 30 % and 50 % busy on the GPU engine, 5 % on
 * the encoder; the decoder is not supported. */
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long lastSeenTimeStamp,
                                  nvmlValueType_t *sampleValType, unsigned int *sampleCount, nvmlSample_t *samples) {
	unsigned int values[2];
	switch (type) {
	case NVML_GPU_UTILIZATION_SAMPLES: values[0] = 30; values[1] = 50; break;
	case NVML_ENC_UTILIZATION_SAMPLES: values[0] = 5; values[1] = 5; break;
	default: return NVML_ERROR_NOT_SUPPORTED;
	}
	*sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
	if (samples == NULL) {
		*sampleCount = 2;
		return NVML_SUCCESS;
	}
	if (*sampleCount < 2) {
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	unsigned long long base = lastSeenTimeStamp > sample_clock ? lastSeenTimeStamp : sample_clock;
	for (int i = 0; i < 2; i++) {
		samples[i].timeStamp = base + 1 + i;
		samples[i].sampleValue.uiVal = values[i];
	}
	*sampleCount = 2;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
	*power = 275500 + 1000 * device.handle->index; /* mW */
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
	*energy = 123456789ULL; /* mJ */
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp) {
	*temp = 51;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
	*eccCounts = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? 7 : 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
	return NVML_ERROR_NOT_SUPPORTED;
}

/* scripted_processes reads NVML_STUB_PROCESSES into pids/bytes; -1 when
 * the variable is unset. */
static int scripted_processes(unsigned int *pids, unsigned long long *bytes) {
	const char *path = getenv("NVML_STUB_PROCESSES");
	if (path == NULL) {
		return -1;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	int n = 0;
	while (n < STUB_MAX_PROCESSES && fscanf(f, "%u %llu", &pids[n], &bytes[n]) == 2) {
		n++;
	}
	fclose(f);
	return n;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) {
	if (device.handle->index != 0) {
		*infoCount = 0;
		return NVML_SUCCESS;
	}
	unsigned int pids[STUB_MAX_PROCESSES];
	unsigned long long bytes[STUB_MAX_PROCESSES];
	int n = scripted_processes(pids, bytes);
	if (n >= 0) {
		if (*infoCount < (unsigned int)n) {
			*infoCount = (unsigned int)n;
			return NVML_ERROR_INSUFFICIENT_SIZE;
		}
		for (int i = 0; i < n; i++) {
			infos[i].pid = pids[i];
			infos[i].usedGpuMemory = bytes[i];
			infos[i].gpuInstanceId = 0xFFFFFFFF;
			infos[i].computeInstanceId = 0xFFFFFFFF;
		}
		*infoCount = (unsigned int)n;
		return NVML_SUCCESS;
	}
	if (*infoCount < 1) {
		*infoCount = 1;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	infos[0].pid = (unsigned int)getpid();
	infos[0].usedGpuMemory = 2 * GIB;
	infos[0].gpuInstanceId = 0xFFFFFFFF;
	infos[0].computeInstanceId = 0xFFFFFFFF;
	*infoCount = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) {
	*infoCount = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
	event_set.waits = 0;
	set->handle = &event_set;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
	*eventTypes = nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
	if (set.handle->waits++ == 0) {
		memset(data, 0, sizeof(*data));
		data->device.handle = &gpus[1];
		data->eventType = nvmlEventTypeXidCriticalError;
		data->eventData = 13;
		return NVML_SUCCESS;
	}
	struct timespec ts = {0, (long)(timeoutms < 10 ? timeoutms : 10) * 1000000L};
	nanosleep(&ts, NULL);
	return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
	return NVML_SUCCESS;
}
