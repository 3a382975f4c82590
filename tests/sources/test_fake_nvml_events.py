"""The fake NVML's event API: registration, delivery only to sets registered for the type, waits, frees."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from spark_watchd.sources.fake_nvml_events import SUPPORTED_EVENTS, XID_CRITICAL
from spark_watchd.testing import FakeNvml


def _two_gpus() -> FakeNvml:
    nvml = FakeNvml([FakeNvml.gb10().gpus[0], FakeNvml.gb10(index=1, uuid="GPU-b").gpus[0]])
    nvml.nvmlInit()
    return nvml


def _registered(nvml: FakeNvml, gpu: int = 0, events: int = XID_CRITICAL):
    es = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(gpu), events, es)
    return es


def _error(call) -> int:
    with pytest.raises(pynvml.NVMLError) as info:
        call()
    return info.value.value


def test_an_injected_xid_is_read_back_with_its_gpu_type_and_code():
    nvml = _two_gpus()
    es = _registered(nvml, gpu=1)
    assert nvml.inject_xid(79, gpu=1) == 1
    data = nvml.nvmlEventSetWait_v2(es, 0)
    assert data.eventType == XID_CRITICAL and data.eventData == 79
    assert nvml.nvmlDeviceGetIndex(data.device) == 1


def test_events_are_read_in_the_order_they_were_raised():
    nvml = _two_gpus()
    es = _registered(nvml)
    for code in (13, 43, 79):
        nvml.inject_xid(code)
    assert [nvml.nvmlEventSetWait(es, 0).eventData for _ in range(3)] == [13, 43, 79]


def test_an_event_raised_before_registration_is_not_delivered():
    nvml = _two_gpus()
    assert nvml.inject_xid(79) == 0
    es = _registered(nvml)
    assert _error(lambda: nvml.nvmlEventSetWait_v2(es, 0)) == pynvml.NVML_ERROR_TIMEOUT


def test_an_event_reaches_only_sets_registered_for_its_gpu_and_type():
    nvml = _two_gpus()
    on_0, on_1 = _registered(nvml, gpu=0), _registered(nvml, gpu=1)
    ecc = _registered(nvml, gpu=0, events=pynvml.nvmlEventTypeSingleBitEccError)
    assert nvml.inject_xid(31, gpu=0) == 1
    assert nvml.nvmlEventSetWait_v2(on_0, 0).eventData == 31
    for es in (on_1, ecc):
        assert _error(lambda es=es: nvml.nvmlEventSetWait_v2(es, 0)) == pynvml.NVML_ERROR_TIMEOUT


def test_every_registered_set_gets_its_own_copy():
    nvml = _two_gpus()
    a, b = _registered(nvml), _registered(nvml)
    assert nvml.inject_xid(119) == 2
    assert nvml.nvmlEventSetWait_v2(a, 0).eventData == nvml.nvmlEventSetWait_v2(b, 0).eventData == 119


def test_a_freed_set_receives_nothing_and_the_free_is_counted():
    nvml = _two_gpus()
    es = _registered(nvml)
    nvml.nvmlEventSetFree(es)
    nvml.nvmlEventSetFree(es)  # a second free leaves the list alone
    assert nvml.inject_xid(79) == 0 and es.freed and not es.pending
    assert nvml.call_counts["nvmlEventSetFree"] == 2


def test_registering_an_unsupported_event_type_is_not_supported():
    nvml = _two_gpus()
    es = nvml.nvmlEventSetCreate()
    unsupported = pynvml.nvmlEventTypeClock
    assert not unsupported & SUPPORTED_EVENTS
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert (
        _error(lambda: nvml.nvmlDeviceRegisterEvents(handle, unsupported, es))
        == pynvml.NVML_ERROR_NOT_SUPPORTED
    )
    assert es.registered == {}
    assert nvml.nvmlDeviceGetSupportedEventTypes(handle) == SUPPORTED_EVENTS


def test_a_driver_without_events_refuses_registration():
    nvml = _two_gpus()
    nvml.not_supported = {"nvmlDeviceRegisterEvents"}
    es = nvml.nvmlEventSetCreate()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert (
        _error(lambda: nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL, es))
        == pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_a_lost_gpu_fails_the_wait_even_with_events_pending():
    nvml = _two_gpus()
    es = _registered(nvml)
    nvml.inject_xid(79)
    nvml.lost = True
    assert _error(lambda: nvml.nvmlEventSetWait_v2(es, 0)) == pynvml.NVML_ERROR_GPU_IS_LOST


def test_event_calls_before_init_are_uninitialized():
    nvml = FakeNvml.gb10()
    assert _error(nvml.nvmlEventSetCreate) == pynvml.NVML_ERROR_UNINITIALIZED


def test_device_pointer_is_stable_and_an_unknown_pointer_is_an_invalid_argument():
    nvml = _two_gpus()
    assert nvml.nvmlDeviceGetIndex(nvml.device_pointer(1)) == 1
    assert ctypes.addressof(nvml.device_pointer(1).contents) == ctypes.addressof(
        nvml.device_pointer(1).contents
    )
    assert ctypes.addressof(nvml.device_pointer(0).contents) != ctypes.addressof(
        nvml.device_pointer(1).contents
    )
    stranger = pynvml.pointer(pynvml.struct_c_nvmlDevice_t())
    assert _error(lambda: nvml.nvmlDeviceGetIndex(stranger)) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_device_index_of_a_plain_handle_is_its_index():
    nvml = _two_gpus()
    assert nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByIndex(1)) == 1
