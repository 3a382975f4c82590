"""NVML's event API for the fake NVML (same calls as pynvml): event sets, registration, waits, injected Xids.

    nvml = FakeNvml.gb10()
    nvml.inject_xid(79)                      # GPU 0 reports Xid 79 to every event set registered for Xids
    nvml.not_supported = {"nvmlDeviceRegisterEvents"}   # a driver without Xid events

`nvmlEventSetWait_v2` returns the real `c_nvmlEventData_t` (device, eventType, eventData = the Xid) and
raises `NVMLError_Timeout` when nothing arrives in time, as the real binding does. Like the driver, an
event raised before a set registered for it is not delivered to that set.
"""

from __future__ import annotations

import ctypes
import threading
from collections import deque
from typing import Any

import pynvml as _real

XID_CRITICAL = _real.nvmlEventTypeXidCriticalError
SUPPORTED_EVENTS = XID_CRITICAL | _real.nvmlEventTypeSingleBitEccError | _real.nvmlEventTypeDoubleBitEccError


class FakeEventSet:
    """An opaque event set: what a device registered, and the events waiting to be read."""

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}  # gpu index -> event type mask
        self.pending: deque[tuple[int, int, int]] = deque()  # (gpu index, event type, event data)
        self.ready = threading.Condition()
        self.freed = False


class FakeEventsMixin:
    """Event-API methods of FakeNvml; needs its `gpus`, `_enter` and `call_counts`."""

    def _event_state(self) -> tuple[list[FakeEventSet], dict[int, Any]]:
        if not hasattr(self, "_event_sets"):
            self._event_sets: list[FakeEventSet] = []
            self._device_structs: dict[int, Any] = {}
        return self._event_sets, self._device_structs

    def device_pointer(self, index: int) -> Any:
        """The c_nvmlDevice_t that event data carries for GPU `index` (stable for the fake's life)."""
        _, structs = self._event_state()
        if index not in structs:
            structs[index] = _real.struct_c_nvmlDevice_t()
        return ctypes.pointer(structs[index])

    def inject_xid(self, xid: int, gpu: int = 0) -> int:
        """GPU `gpu` reports Xid `xid`; returns how many event sets it was delivered to."""
        return self.inject_event(XID_CRITICAL, xid, gpu)

    def inject_event(self, event_type: int, data: int, gpu: int = 0) -> int:
        """Deliver one event to every live set registered for its type on that GPU."""
        sets, _ = self._event_state()
        n = 0
        for es in list(sets):
            if not es.freed and es.registered.get(gpu, 0) & event_type:
                with es.ready:
                    es.pending.append((gpu, event_type, data))
                    es.ready.notify_all()
                n += 1
        return n

    def nvmlEventSetCreate(self) -> FakeEventSet:
        self._enter("nvmlEventSetCreate", device=False)
        es = FakeEventSet()
        self._event_state()[0].append(es)
        return es

    def nvmlDeviceGetSupportedEventTypes(self, h: Any) -> int:
        self._enter("nvmlDeviceGetSupportedEventTypes")
        return SUPPORTED_EVENTS

    def nvmlDeviceRegisterEvents(self, h: Any, event_types: int, es: FakeEventSet) -> None:
        self._enter("nvmlDeviceRegisterEvents")
        if event_types & ~SUPPORTED_EVENTS:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        es.registered[h.index] = es.registered.get(h.index, 0) | int(event_types)

    def nvmlEventSetWait_v2(self, es: FakeEventSet, timeout_ms: int) -> Any:
        self._enter("nvmlEventSetWait_v2", device=False)
        if getattr(self, "lost", False):
            raise _real.NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        with es.ready:
            if not es.pending:
                es.ready.wait(timeout_ms / 1000.0)
            if not es.pending:
                raise _real.NVMLError(_real.NVML_ERROR_TIMEOUT)
            gpu, event_type, data = es.pending.popleft()
        none = 0xFFFFFFFF
        return _real.c_nvmlEventData_t(
            device=self.device_pointer(gpu),
            eventType=event_type,
            eventData=data,
            gpuInstanceId=none,
            computeInstanceId=none,
        )

    def nvmlEventSetWait(self, es: FakeEventSet, timeout_ms: int) -> Any:
        return self.nvmlEventSetWait_v2(es, timeout_ms)

    def nvmlEventSetFree(self, es: FakeEventSet) -> None:
        self.call_counts["nvmlEventSetFree"] += 1
        es.freed = True
        sets, _ = self._event_state()
        if es in sets:
            sets.remove(es)

    def nvmlDeviceGetIndex(self, h: Any) -> int:
        self._enter("nvmlDeviceGetIndex")
        if hasattr(h, "index") and not hasattr(h, "contents"):
            return int(h.index)
        _, structs = self._event_state()
        addr = ctypes.addressof(h.contents)
        for index, st in structs.items():
            if ctypes.addressof(st) == addr:
                return index
        raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
