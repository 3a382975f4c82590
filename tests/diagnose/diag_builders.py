"""Builders (and fixtures) for hand-made GB10 sample windows; imported by the diagnose tests."""

from __future__ import annotations

from spark_watchd.sample.model import GpuReading, ProcessInfo, Sample, ThroughputReading

GIB = 1024**3
KB_GIB = 1024 * 1024


class Host:
    """Builds consecutive samples with consistent cumulative counters (rates given per second)."""

    def __init__(self, interval=30.0, boot_id="boot-a", t0=1_764_400_000.0):
        self.interval = interval
        self.ts = t0
        self.boot_id = boot_id
        self.uptime = 10_000.0
        self.thermal_us = 0
        self.slowdown_us = 0
        self.powercap_us = 0
        self.vm = {"pgmajfault": 1000, "pswpin": 0, "pswpout": 500, "oom_kill": 0}
        self.psi = {"some": 0, "full": 0}

    def reboot(self, boot_id="boot-b", gap=400.0):
        self.boot_id = boot_id
        self.ts += gap
        self.uptime = 30.0
        self.thermal_us = 0
        self.vm = {"pgmajfault": 10, "pswpin": 0, "pswpout": 0, "oom_kill": 0}

    def sample(
        self,
        *,
        temp=79.0,
        power=92.0,
        clk=2418,
        util=97.0,
        mask=0,
        thermal_share=0.0,
        powercap_share=0.0,
        hw_slowdown_share=0.0,
        slowdown=86.0,
        shutdown=90.0,
        counters=True,
        gpu=True,
        avail_gib=60.0,
        avail_min_gib=None,
        cached_gib=19.0,
        anon_gib=6.0,
        psi_some=0.2,
        psi_full=0.0,
        swapout=0.0,
        majfault=2.0,
        oom=0,
        processes=(),
        step=None,
        job="sft",
        meminfo=True,
        boot_id=True,
        board=None,
    ) -> Sample:
        dt = self.interval
        self.ts += dt
        self.uptime += dt
        self.thermal_us += int(thermal_share * dt * 1e6)
        self.powercap_us += int(powercap_share * dt * 1e6)
        self.slowdown_us += int(hw_slowdown_share * dt * 1e6)
        self.vm["pgmajfault"] += int(majfault * dt)
        self.vm["pswpout"] += int(swapout * dt)
        self.vm["oom_kill"] += oom
        self.psi["some"] += int(psi_some / 100 * dt * 1e6)
        self.psi["full"] += int(psi_full / 100 * dt * 1e6)
        gpus = ()
        if gpu:
            ctr = None
            if counters:
                ctr = {
                    "sw_power_cap": self.powercap_us,
                    "hw_slowdown": self.slowdown_us,
                    "sw_thermal": self.thermal_us,
                    "hw_thermal": 0,
                    "hw_power_brake": 0,
                }
            gpus = (
                GpuReading(
                    index=0,
                    name="NVIDIA GB10",
                    uuid="GPU-x",
                    power_w=power,
                    temp_c=temp,
                    sm_clock_mhz=clk,
                    clocks_event_reasons=mask,
                    clocks_event_counters_us=ctr,
                    applications_clock_mhz=2418,
                    slowdown_temp_c=slowdown,
                    shutdown_temp_c=shutdown,
                    util_pct=util,
                ),
            )
        mem = {}
        if meminfo:
            mem = {
                "MemTotal": 127600748,
                "MemAvailable": int(avail_gib * KB_GIB),
                "Cached": int(cached_gib * KB_GIB),
                "AnonPages": int(anon_gib * KB_GIB),
                "SwapTotal": 16777216,
                "SwapFree": 8000000,
            }
        mn = avail_min_gib if avail_min_gib is not None else avail_gib
        tp = ()
        if step is not None:
            tp = (ThroughputReading(job=job, ts=self.ts, step=int(self.ts), step_seconds=step),)
        psi = {
            "some": {"avg10": psi_some, "avg60": psi_some, "avg300": 0.0, "total": self.psi["some"]},
            "full": {"avg10": psi_full, "avg60": psi_full, "avg300": 0.0, "total": self.psi["full"]},
        }
        return Sample(
            ts=self.ts,
            host="t",
            boot_id=self.boot_id if boot_id else None,
            uptime_s=self.uptime,
            gpus=gpus,
            meminfo=mem,
            psi_memory=psi if meminfo else None,
            vmstat=dict(self.vm),
            mem_available_min_kb=int(mn * KB_GIB) if meminfo else None,
            processes=tuple(processes),
            throughput=tp,
            board=board,
        )

    def run(self, n, **kw) -> list[Sample]:
        return [self.sample(**kw) for _ in range(n)]


def proc(pid, cmdline, rss_gib, gpu_gib=0.0, resident=True, create_time=1000.0, ppid=None) -> ProcessInfo:
    return ProcessInfo(
        ppid=ppid,
        pid=pid,
        create_time=create_time,
        name=cmdline[0].rsplit("/", 1)[-1],
        cmdline=tuple(cmdline),
        rss_bytes=int(rss_gib * GIB),
        gpu_mem_bytes=int(gpu_gib * GIB),
        gpu_resident=resident,
    )


def vllm_engine(flags, gpu_gib) -> list[ProcessInfo]:
    """A vLLM launcher (1.8 GiB RSS, no GPU memory) and its EngineCore (1.2 GiB RSS), NVML counting gpu_gib."""
    return [
        proc(
            4100,
            ["vllm", "serve", "Qwen/Qwen3-32B", *flags],
            1.8,
            0.0,
            resident=False,
            create_time=900.0,
            ppid=1,
        ),
        proc(4121, ["VLLM::EngineCore"], 1.2, gpu_gib, create_time=901.0, ppid=4100),
    ]
