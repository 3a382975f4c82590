/* The NVML shim's event-set API: Xid critical errors from the scenario's `xid` lines. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "shim.h"

#define MAX_SETS 16
#define QUEUE_MAX 64
struct nvmlEventSet_st {
    int used;
    unsigned long long types[SHIM_MAX_GPUS];
    unsigned int gpu[QUEUE_MAX];
    unsigned long long xid[QUEUE_MAX];
    int head, len;
};

static struct nvmlEventSet_st sets[MAX_SETS];
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

static int valid(nvmlEventSet_t set) { return set && set >= sets && set < sets + MAX_SETS && set->used; }

/* Hand the Xids now due to every set registered for them on that GPU (an Xid before registration is lost). */
static void deliver_due(void) {
    unsigned int gpus[QUEUE_MAX];
    unsigned long long codes[QUEUE_MAX];
    int n = shim_take_due_xids(gpus, codes, QUEUE_MAX);
    pthread_mutex_lock(&sets_lock);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < MAX_SETS; s++) {
            struct nvmlEventSet_st *set = &sets[s];
            if (!set->used || gpus[i] >= SHIM_MAX_GPUS || !(set->types[gpus[i]] & nvmlEventTypeXidCriticalError))
                continue;
            if (set->len == QUEUE_MAX) continue; /* full: dropped, as a driver's queue drops */
            int at = (set->head + set->len++) % QUEUE_MAX;
            set->gpu[at] = gpus[i];
            set->xid[at] = codes[i];
        }
    pthread_mutex_unlock(&sets_lock);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    ENTER(NULL);
    pthread_mutex_lock(&sets_lock);
    for (int s = 0; s < MAX_SETS; s++)
        if (!sets[s].used) {
            memset(&sets[s], 0, sizeof sets[s]);
            sets[s].used = 1;
            *set = &sets[s];
            pthread_mutex_unlock(&sets_lock);
            return NVML_SUCCESS;
        }
    pthread_mutex_unlock(&sets_lock);
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
    ENTER(device);
    return shim_gpu_number(device, "event_types", eventTypes);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    ENTER(device);
    unsigned long long supported = 0;
    nvmlReturn_t r = shim_gpu_number(device, "event_types", &supported);
    if (r != NVML_SUCCESS) return r;
    if (eventTypes & ~supported) return NVML_ERROR_NOT_SUPPORTED;
    if (!valid(set)) return NVML_ERROR_INVALID_ARGUMENT;
    deliver_due(); /* what came due before this registration is not this set's */
    pthread_mutex_lock(&sets_lock);
    set->types[device->index] |= eventTypes;
    pthread_mutex_unlock(&sets_lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    ENTER(NULL);
    if (!valid(set)) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec step = {0, 10 * 1000 * 1000};
    for (unsigned int waited = 0;; waited += 10) {
        deliver_due();
        pthread_mutex_lock(&sets_lock);
        if (set->len) {
            data->device = &shim_devices[set->gpu[set->head]];
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = set->xid[set->head];
            data->gpuInstanceId = 0xFFFFFFFF;
            data->computeInstanceId = 0xFFFFFFFF;
            set->head = (set->head + 1) % QUEUE_MAX;
            set->len--;
            pthread_mutex_unlock(&sets_lock);
            return NVML_SUCCESS;
        }
        pthread_mutex_unlock(&sets_lock);
        if (waited >= timeoutms) return NVML_ERROR_TIMEOUT;
        nanosleep(&step, NULL);
        nvmlReturn_t r = shim_enter("nvmlEventSetWait_v2", NULL); /* a GPU lost while waiting ends the wait */
        if (r != NVML_SUCCESS) return r;
    }
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (!set || set < sets || set >= sets + MAX_SETS) return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&sets_lock);
    set->used = 0;
    pthread_mutex_unlock(&sets_lock);
    return NVML_SUCCESS;
}
