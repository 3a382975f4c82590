"""Configuration of the sources (`[sources]` in config.toml)."""

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spark_watchd.sample.quantities import Delay, Seconds


class SourcesSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Roots are injectable so tests and containers point at another tree (like node_exporter --path.procfs).
    proc_root: str = Field("/proc", description="Where /proc is mounted.")
    sys_root: str = Field("/sys", description="Where /sys is mounted.")
    # A wedged driver must cost a tick at most this long, never the daemon; NVML answers in milliseconds.
    nvml_timeout_s: Seconds = Field(
        5.0, le=60, description="Bound on one tick's NVML reading; over it the source is down."
    )
    # Retry a failed NVML at the next tick, then after 10, 20, 40... s up to the cap: a machine without a
    # driver is not probed every tick.
    nvml_backoff_initial_s: Seconds = Field(
        10.0, le=3600, description="First wait before re-initialising a failed NVML."
    )
    nvml_backoff_max_s: Seconds = Field(300.0, le=86400, description="Longest wait between NVML retries.")
    nvidia_smi_path: str = Field(
        "nvidia-smi", description="nvidia-smi binary for the fallback (used only when NVML cannot load)."
    )
    nvidia_smi_timeout_s: Seconds = Field(10.0, le=120, description="nvidia-smi is killed after this long.")
    # On GB10 MemAvailable has fallen from 29 to 2.5 GiB in 9 s: a 30 s tick alone misses the dip.
    fast_watch_interval_s: Delay = Field(
        1.0,
        le=10,
        description="Seconds between MemAvailable/PSI readings between ticks; 0 turns the watch off.",
    )

    # Driver faults (Xid, NV_ERR_NO_MEMORY, PCIe AER fatal): every feed optional, missing ones are states.
    driver_events: bool = Field(
        True, description="Watch NVML Xid events and the kernel log for driver faults (driver_events)."
    )
    journalctl_path: str = Field(
        "journalctl",
        description="journalctl for the previous boot's and the live kernel log; empty turns both off. "
        "Reading them needs group systemd-journal (the shipped unit adds it).",
    )
    # journalctl -k -b -1 on a week-long boot answers in well under a second; the first tick waits for it.
    journal_timeout_s: Seconds = Field(
        5.0, le=60, description="journalctl reading the previous boot is killed after this long."
    )
    kernel_log_follow: bool = Field(
        True, description="Follow the live kernel log (journalctl -k -f) for NV_ERR_NO_MEMORY and AER lines."
    )

    ray_log_dir: str = Field(
        "/tmp/ray/session_latest/logs",
        description="Ray's log directory (<Ray --temp-dir>/session_latest/logs): its gcs_server.out names the "
        "workers Ray's memory monitor killed; empty turns it off. Under the shipped unit's PrivateTmp the "
        "default /tmp/ray is not visible: set Ray's --temp-dir outside /tmp and this path to match.",
    )

    # The boot's stack (sources/platform.py): kernel, driver, firmware. They change with a reboot or a driver
    # reload, so a reading every 10 minutes costs ~15 small file reads and misses nothing that matters.
    platform: bool = Field(
        True, description="Read the boot's kernel, NVIDIA driver and flavour, BIOS and firmware versions."
    )
    platform_refresh_s: Seconds = Field(
        600.0,
        le=86400,
        description="Seconds between readings of the platform files within a boot (a driver reload changes "
        "the driver); 0 reads them once per daemon start.",
    )
    dgx_release_path: str = Field(
        "/etc/dgx-release", description="DGX OS's release file, whose DGX_OTA_VERSION is the OTA level."
    )
    # DGX OS's OTA recipes name the SOC firmware (SOCFW) by the GUID of its UEFI capsule, which the kernel
    # lists world-readable in the ESRT (anakronox/spark-dash docs/fleet-updates.md: spark-ota-2607.json).
    soc_firmware_esrt_class: str = Field(
        "b488217b",
        description="Start of the ESRT fw_class GUID whose fw_version is the SOC firmware "
        "(/sys/firmware/efi/esrt/entries/*); empty: not read.",
    )

    @field_validator("fast_watch_interval_s")
    @classmethod
    def _watch_not_too_fast(cls, v: float) -> float:
        if 0 < v < 0.1:
            raise ValueError("must be 0 (off) or at least 0.1 s")
        return v
