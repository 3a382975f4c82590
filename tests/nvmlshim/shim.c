/* A GB10-shaped libnvidia-ml.so.1 for tests: the NVML entry points spark-watchd and nvidia-ml-py call,
 * defined against NVIDIA's own nvml.h (built with -Wmissing-prototypes -Werror, so every exported
 * function matches a declaration of the header), answering from the scenario (scenario.c);
 * the event-set API is in events.c.
 * Build with -DSHIM_LEGACY for a pre-R510 library: no _v3 process lists, no nvmlDeviceGetTemperatureV,
 * no nvmlDeviceGetCurrentClocksEventReasons (nvidia-ml-py then raises what it raises on old drivers).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"

struct nvmlDevice_st shim_devices[SHIM_MAX_GPUS] = {{0}, {1}, {2}, {3}};
static int init_count;

static unsigned int gpu_count(void) {
    unsigned long long n = 1;
    shim_number("gpus", &n, NVML_SUCCESS);
    return n > SHIM_MAX_GPUS ? SHIM_MAX_GPUS : (unsigned int)n;
}

nvmlReturn_t shim_enter(const char *fn, nvmlDevice_t dev) {
    shim_refresh();
    if (__atomic_load_n(&init_count, __ATOMIC_SEQ_CST) <= 0) return NVML_ERROR_UNINITIALIZED;
    if (dev && (dev < shim_devices || dev >= shim_devices + gpu_count())) return NVML_ERROR_INVALID_ARGUMENT;
    return shim_guard(fn);
}

nvmlReturn_t shim_gpu_number(nvmlDevice_t dev, const char *key, unsigned long long *out) {
    char k[96], v[SHIM_VALUE_MAX];
    snprintf(k, sizeof k, "gpu%u.%s", dev ? dev->index : 0, key);
    return shim_number(shim_value(k, v, sizeof v) ? k : key, out, NVML_ERROR_NOT_SUPPORTED);
}

static nvmlReturn_t uint_value(nvmlDevice_t dev, const char *key, unsigned int *out) {
    unsigned long long v;
    nvmlReturn_t r = shim_gpu_number(dev, key, &v);
    if (r == NVML_SUCCESS) *out = (unsigned int)v;
    return r;
}

static nvmlReturn_t string_value(nvmlDevice_t dev, const char *key, char *out, unsigned int length) {
    char k[96], v[SHIM_VALUE_MAX];
    snprintf(k, sizeof k, "gpu%u.%s", dev ? dev->index : 0, key);
    if (!shim_value(k, v, sizeof v) && !shim_value(key, v, sizeof v)) return NVML_ERROR_NOT_SUPPORTED;
    int code = shim_error_code(v);
    if (code > 0) return (nvmlReturn_t)code; /* `name=UNKNOWN`: the call fails */
    if (!out || strlen(v) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, v, strlen(v) + 1);
    return NVML_SUCCESS;
}

/* --- init, system ------------------------------------------------------------------------------ */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    unsigned long long code = 0;
    shim_refresh();
    nvmlReturn_t r = shim_number("init", &code, NVML_SUCCESS); /* init=LIB_RM_VERSION_MISMATCH */
    if (r != NVML_SUCCESS) return r;
    if (code) return (nvmlReturn_t)code;
    __atomic_add_fetch(&init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (__atomic_load_n(&init_count, __ATOMIC_SEQ_CST) <= 0) return NVML_ERROR_UNINITIALIZED;
    __atomic_sub_fetch(&init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    const char *name = shim_error_name(result);
    return name ? name : "Unknown Error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER(NULL);
    return string_value(NULL, "driver", version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    ENTER(NULL);
    return string_value(NULL, "nvml_version", version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    ENTER(NULL);
    *deviceCount = gpu_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    ENTER(NULL);
    if (index >= gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &shim_devices[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    ENTER(device);
    *index = device->index;
    return NVML_SUCCESS;
}

/* --- identity ---------------------------------------------------------------------------------- */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER(device);
    return string_value(device, "name", name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER(device);
    return string_value(device, "uuid", uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    ENTER(device);
    nvmlReturn_t r = string_value(device, "pci_bus_id", pci->busId, sizeof pci->busId);
    if (r != NVML_SUCCESS) return r;
    unsigned int domain = 0, bus = 0, dev = 0;
    sscanf(pci->busId, "%x:%x:%x", &domain, &bus, &dev);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, domain, bus, dev);
    pci->pciDeviceId = 0; /* not in any GB10 capture: left 0 rather than guessed */
    pci->pciSubSystemId = 0;
    return NVML_SUCCESS;
}

/* --- thermal, power, clocks -------------------------------------------------------------------- */
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp) {
    ENTER(device);
    if (sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_value(device, "temp", temp);
}

#ifndef SHIM_LEGACY
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature) {
    ENTER(device);
    if (temperature->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long v;
    nvmlReturn_t r = shim_gpu_number(device, "temp", &v);
    if (r == NVML_SUCCESS) temperature->temperature = (int)v;
    return r;
}
#endif

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int *temp) {
    ENTER(device);
    switch (thresholdType) {
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: return uint_value(device, "slowdown", temp);
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: return uint_value(device, "shutdown", temp);
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: return uint_value(device, "gpu_max", temp);
    default: return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    ENTER(device);
    return uint_value(device, "power_mw", power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    ENTER(device);
    return uint_value(device, "power_limit_mw", limit);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    ENTER(device);
    return shim_gpu_number(device, "energy_mj", energy);
}

static const char *clock_key(nvmlClockType_t type, const char *sm, const char *other) {
    return type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS ? sm : other;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    ENTER(device);
    return uint_value(device, clock_key(type, "sm_clock", "mem_clock"), clock);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    ENTER(device);
    return uint_value(device, clock_key(type, "max_clock", "max_mem_clock"), clock);
}

nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t clockType,
                                            unsigned int *clockMHz) {
    ENTER(device);
    return uint_value(device, clock_key(clockType, "app_clock", "app_mem_clock"), clockMHz);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    ENTER(device);
    nvmlReturn_t r = uint_value(device, "util", &utilization->gpu);
    return r == NVML_SUCCESS ? uint_value(device, "mem_util", &utilization->memory) : r;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons) {
    ENTER(device);
    return shim_gpu_number(device, "reasons", clocksThrottleReasons);
}

#ifndef SHIM_LEGACY
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *clocksEventReasons) {
    ENTER(device);
    return shim_gpu_number(device, "reasons", clocksEventReasons);
}
#endif

/* Each field answers on its own (`fi.<id>` in ns, or an error name); the call itself succeeds. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values) {
    ENTER(device);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int i = 0; i < valuesCount; i++) {
        char key[32];
        snprintf(key, sizeof key, "fi.%u", values[i].fieldId);
        values[i].timestamp = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        values[i].latencyUsec = 0;
        values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        values[i].nvmlReturn = shim_gpu_number(device, key, &values[i].value.ullVal);
    }
    return NVML_SUCCESS;
}

/* The older per-policy form: power and thermal read the same counters as the field values. */
nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t *violTime) {
    ENTER(device);
    char key[32];
    snprintf(key, sizeof key, "violation.%d", (int)perfPolicyType);
    const char *fallback = perfPolicyType == NVML_PERF_POLICY_POWER     ? "fi.74"
                           : perfPolicyType == NVML_PERF_POLICY_THERMAL ? "fi.269"
                                                                        : key;
    char v[SHIM_VALUE_MAX];
    nvmlReturn_t r = shim_gpu_number(device, shim_value(key, v, sizeof v) ? key : fallback, &violTime->violationTime);
    violTime->referenceTime = (unsigned long long)time(NULL) * 1000000ULL;
    return r;
}

/* --- memory and processes ---------------------------------------------------------------------- */
/* `memory=TOTAL,USED` bytes, or an error name (GB10: NOT_SUPPORTED). */
static nvmlReturn_t memory(nvmlDevice_t dev, unsigned long long *total, unsigned long long *used) {
    char v[SHIM_VALUE_MAX];
    if (string_value(dev, "memory", v, sizeof v) != NVML_SUCCESS || !*v) return NVML_ERROR_NOT_SUPPORTED;
    int code = shim_error_code(v);
    if (code >= 0 && !strchr(v, ',')) return (nvmlReturn_t)code;
    if (sscanf(v, "%llu,%llu", total, used) != 2) return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *mem) {
    ENTER(device);
    nvmlReturn_t r = memory(device, &mem->total, &mem->used);
    if (r == NVML_SUCCESS) mem->free = mem->total - mem->used;
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *mem) {
    ENTER(device);
    if (mem->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t r = memory(device, &mem->total, &mem->used);
    if (r == NVML_SUCCESS) {
        mem->reserved = 0;
        mem->free = mem->total - mem->used;
    }
    return r;
}

#ifndef SHIM_LEGACY
/* `compute=PID:BYTES,PID:na`: `na` is NVML_VALUE_NOT_AVAILABLE, as GB10 answers per-process memory. */
static nvmlReturn_t processes(nvmlDevice_t dev, const char *key, unsigned int *infoCount, nvmlProcessInfo_t *infos) {
    char v[SHIM_VALUE_MAX];
    nvmlReturn_t r = string_value(dev, key, v, sizeof v); /* `compute=NOT_SUPPORTED`: the call fails */
    if (r != NVML_SUCCESS) return r;
    unsigned int n = 0, cap = *infoCount;
    for (char *save = NULL, *tok = strtok_r(v, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        if (!infos || n >= cap) continue;
        char *colon = strchr(tok, ':');
        infos[n].pid = (unsigned int)strtoul(tok, NULL, 10);
        infos[n].usedGpuMemory = (!colon || strcmp(colon + 1, "na") == 0)
                                     ? (unsigned long long)NVML_VALUE_NOT_AVAILABLE
                                     : strtoull(colon + 1, NULL, 10);
        infos[n].gpuInstanceId = 0xFFFFFFFF;
        infos[n].computeInstanceId = 0xFFFFFFFF;
    }
    *infoCount = n;
    return n > cap || (n && !infos) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
    ENTER(device);
    return processes(device, "compute", infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos) {
    ENTER(device);
    return processes(device, "graphics", infoCount, infos);
}
#endif
