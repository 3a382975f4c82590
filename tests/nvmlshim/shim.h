/* The NVML shim's scenario layer (scenario.c), shared with the entry points (shim.c).
 * Every function takes the one lock itself; values are copied out, never pointed into. */
#ifndef SPARK_WATCHD_NVML_SHIM_H
#define SPARK_WATCHD_NVML_SHIM_H

#include <nvml.h>

#define SHIM_MAX_GPUS 4
#define SHIM_VALUE_MAX 256

/* Only the NVML entry points are exported. */
#pragma GCC visibility push(hidden)

/* Reload the scenario file when it changed (a rewrite restarts its clock). */
void shim_refresh(void);
/* The value of KEY now (the latest line due); 0 when absent. *SINCE (if not NULL): how long that line
 * has been due, in seconds. */
int shim_value_since(const char *key, char *out, size_t size, double *since);
int shim_value(const char *key, char *out, size_t size);
/* An error name (GPU_IS_LOST) or number as an nvmlReturn_t; -1 when TEXT is neither. */
int shim_error_code(const char *text);
const char *shim_error_name(nvmlReturn_t code);
/* KEY as a number (`BASE+RATE/s` grows by RATE per second from the time its line is due): SUCCESS and *out, or the error code the scenario names, or DFLT_RET when absent. */
nvmlReturn_t shim_number(const char *key, unsigned long long *out, nvmlReturn_t dflt_ret);
/* Xid events due since the last call, for the event sets (gpu index, Xid code); returns how many. */
int shim_take_due_xids(unsigned int *gpus, unsigned long long *codes, int max);
/* The device-call guard: hangs and faults named for FN (or for every call). */
nvmlReturn_t shim_guard(const char *fn);

/* shim.c, for events.c: the shim_devices, the call guard and a per-GPU number (`gpu1.temp` before `temp`). */
struct nvmlDevice_st {
    unsigned int index;
};
extern struct nvmlDevice_st shim_devices[SHIM_MAX_GPUS];
/* Every call after nvmlInit: uninitialised, bad handle, then the scenario's hang and fault for FN. */
nvmlReturn_t shim_enter(const char *fn, nvmlDevice_t dev);
nvmlReturn_t shim_gpu_number(nvmlDevice_t dev, const char *key, unsigned long long *out);
#define ENTER(dev)                                                                                    \
    do {                                                                                              \
        nvmlReturn_t r_ = shim_enter(__func__, (dev));                                                     \
        if (r_ != NVML_SUCCESS) return r_;                                                            \
    } while (0)

#pragma GCC visibility pop

#endif
