"""Panels for the optional signals: GB10 board telemetry (spbm driver), the ConnectX-7 link, DDP cluster peers."""

from __future__ import annotations

from panels import SEL, Layout, m, panel, refs


def board_panels(L: Layout) -> None:
    """One Spark's board power, limits and thermal clamp, from the community spbm hwmon driver."""
    L.row("Board (GB10 spbm driver, when installed)")
    L.add(
        panel(
            "timeseries",
            "Board power",
            "Whole system, DC input, SoC package and GPU rails from the board firmware (energy-averaged where "
            "an accumulator exists). Empty without the community spbm driver.",
            refs(
                (
                    m("sparkwatchd_board_power_watts", 'channel=~"sys_total|dc_input|soc_pkg|gpu"'),
                    "{{channel}}",
                )
            ),
            "watt",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Firmware power limits",
            "EWMA power of the pl1/syspl1 controllers against their limits: an EWMA on its limit is the "
            "platform cap (not heat), and explains a step-time change NVML shows no reason for.",
            refs(
                (m("sparkwatchd_board_power_watts", 'channel=~"ewma_pl1|ewma_syspl1"'), "{{channel}}"),
                (m("sparkwatchd_board_power_limit_watts", 'channel=~"pl1|syspl1"'), "{{channel}} limit"),
            ),
            "watt",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "PROCHOT and Tj headroom",
            "PROCHOT asserted (1) or a headroom near 0 under load is a thermal clamp even when NVML's reason "
            "mask reads 0.",
            refs(
                (m("sparkwatchd_board_tj_headroom_celsius"), "Tj headroom (C)"),
                (m("sparkwatchd_board_prochot"), "PROCHOT"),
            ),
            "none",
            min=0,
        ),
        w=8,
    )


def link_panels(L: Layout) -> None:
    """The ConnectX-7 ports between Sparks (the `link` source): state, rate, errors and retransmits."""
    L.row("ConnectX-7 link (RDMA ports)")
    legend = "{{device}}/{{port}}"
    L.add(
        panel(
            "timeseries",
            "Link up and judged faulty",
            "1 while a port is ACTIVE with its netdev up; problem 1 while the daemon judges it down (after being "
            "up this boot), below 200 Gb/s or counting errors. A Spark with one cable has two ports up.",
            refs(
                (m("sparkwatchd_link_up"), legend + " up"),
                (m("sparkwatchd_link_problem"), legend + " problem"),
            ),
            "none",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Link rate",
            "Negotiated rate per port: 200 Gb/s (25 GB/s) with an approved cable.",
            refs((m("sparkwatchd_link_rate_bytes_per_second"), legend)),
            "Bps",
            min=0,
        ),
        w=8,
    )
    L.add(
        panel(
            "timeseries",
            "Link errors and retransmits",
            "Rising symbol errors, receive errors or RoCE retransmits under a DDP job: the cable or the peer, "
            "not heat.",
            refs(
                (
                    f"rate({m('sparkwatchd_link_symbol_errors_total')}[$__rate_interval])",
                    legend + " symbol errors/s",
                ),
                (
                    f"rate({m('sparkwatchd_link_retransmits_total')}[$__rate_interval])",
                    legend + " retransmits/s",
                ),
            ),
            "none",
            min=0,
        ),
        w=8,
    )


def cluster_panels(L: Layout) -> None:
    """Each clustered Spark against the mean of its cluster peers (what SparkWatchdStraggler compares)."""
    L.row("Clusters (DDP/FSDP peers, by the cluster label)")
    legend = "{{cluster}} {{instance}}"
    for title, desc, own, unit in (
        (
            "SM clock under load vs peers",
            "Each Spark under load and the mean of the other Sparks of its cluster: the straggler alert fires "
            "when one sits >10% under its peers for 15 min.",
            "sparkwatchd:cluster_gpu_sm_clock_loaded:hertz",
            "hertz",
        ),
        (
            "Temperature under load vs peers",
            "A Spark 5 C hotter than its cluster peers for 15 min is a straggler (its cooling, usually).",
            "sparkwatchd:cluster_gpu_temperature_loaded:celsius",
            "celsius",
        ),
        (
            "Utilisation vs peers",
            "Peers of a throttling Spark wait in the collective: their utilisation drops under its own.",
            "sparkwatchd:cluster_gpu_utilization:ratio",
            "percentunit",
        ),
    ):
        peers = own.replace("cluster_gpu_", "cluster_peers_gpu_")
        L.add(
            panel(
                "timeseries",
                title,
                desc,
                refs((own + "{" + SEL + "}", legend), (peers + "{" + SEL + "}", legend + " peers")),
                unit,
            ),
            w=8,
        )
