"""Rules about the layout itself: layouts Megatron refuses, layers that do not split, idle GPUs.
"""

from __future__ import annotations

from linkscope.topo.checks.context import LayoutContext, finding_ranks, pp_last
from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.layout.groups import megatron_refusal


def rejected_by_megatron(ctx: LayoutContext) -> list[LayoutFinding]:
    reason = megatron_refusal(ctx.layout)
    if reason is None:
        return []
    message = (f"Megatron-Core refuses this layout at start-up (initialize_model_parallel): \"{reason}\"; "
               f"the groups shown are what it would have built")
    fix = f"put pp last: --order {pp_last(ctx.layout.order)}"
    return [LayoutFinding("layout-rejected-by-megatron", "error", "pp", finding_ranks(ctx.groups["pp"][0]), message, fix=fix)]


def layers_not_divisible(ctx: LayoutContext) -> list[LayoutFinding]:
    """Megatron-Core builds an even pipeline only when the layers split evenly: num_layers % pp == 0, and with
    an interleaved schedule (layers per pipeline rank) % vpp == 0 (get_num_layers_to_build asserts both, at
    model build). An uneven split needs the first/last stage sizes given. Judged only for a model the user named."""
    spec, given = ctx.spec, ctx.request.model is not None or ctx.request.model_spec is not None
    pp, vpp, layers = ctx.layout.size("pp"), ctx.layout.vpp, spec.layers
    if not given or pp < 2 or ctx.layout.mesh:
        return []
    if layers % pp:
        room = pp * ctx.layout.size("dp")  # pp can trade ranks with dp at the same world size
        fits = [size for size in range(2, room + 1) if room % size == 0 and layers % size == 0]
        message = (f"{spec.name}'s {layers} layers do not split evenly over pp {pp}: Megatron-Core asserts "
                   f"\"num_layers should be divisible by pipeline_model_parallel_size\" when it builds the model")
        uneven = ("an uneven split: --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (the "
                  "other stages must then split the rest evenly)")
        fix = f"--pp {' or '.join(map(str, fits[:6]))} (dp takes the rest), or {uneven}" if fits else uneven
    elif vpp > 1 and (layers // pp) % vpp:
        per_rank = layers // pp
        fits = [size for size in range(2, per_rank + 1) if per_rank % size == 0]
        message = (f"{spec.name}'s {layers} layers give {per_rank} per pipeline rank, which --vpp {vpp} model chunks "
                   f"do not split evenly: Megatron-Core asserts num_layers_per_pipeline_rank % vpp == 0")
        fix = f"--vpp {' or '.join(map(str, fits[:6]))}" if fits else "no interleaving (--vpp 1)"
    else:
        return []
    return [LayoutFinding("layers-not-divisible", "warning", "pp", finding_ranks(ctx.groups["pp"][0]), message, fix=fix)]


def underfills(ctx: LayoutContext) -> list[LayoutFinding]:
    world, hosts, capacity, request = ctx.layout.world_size, ctx.hosts, ctx.capacity, ctx.request
    if request.rank_map is not None or world >= capacity:
        return []
    used: dict[int, set[int]] = {}
    for node, position in zip(ctx.placement.node_of_rank, ctx.placement.gpu_of_rank, strict=True):
        used.setdefault(node, set()).add(position)
    idle: list[str] = []
    for node, host in enumerate(hosts):
        positions = ([position for position, gpu in enumerate(host.gpus) if gpu.index in request.visible_devices]
                     if request.visible_devices is not None else range(len(host.gpus)))
        free = [host.gpus[position].index for position in positions if position not in used.get(node, set())]
        if free:
            name = host.hostname or f"node {node}"
            gpus = f"GPUs {','.join(map(str, free))}"
            idle.append(f"{name}#{node} {gpus}" if len(hosts) > 1 else gpus)
    shown = "; ".join(idle[:4]) + (f"; ... ({len(idle)} nodes in all)" if len(idle) > 4 else "")
    message = f"the layout uses {world} of the {capacity} GPUs; {capacity - world} sit idle: {shown}"
    fixed = world // max(1, ctx.layout.size("dp"))
    if ctx.layout.mesh:
        fix = f"make the --mesh sizes multiply to {capacity}, or use fewer --nodes"
    elif capacity % fixed == 0:
        fix = f"give --dp {capacity // fixed} (or leave --dp out) to use every GPU, or fewer --nodes"
    else:
        fix = "use fewer --nodes or --visible-devices so the cluster matches the layout"
    return [LayoutFinding("layout-underfills", "warning", "", (), message, fix=fix)]
