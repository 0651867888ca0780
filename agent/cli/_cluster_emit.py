"""``topolink cluster --emit kueue|kai|volcano|slurm``: the objects node-level schedulers read, from the fleet's
node labels (live, or ``--from`` a saved list), printed for ``kubectl apply -f -`` or Slurm's ``topology.yaml``."""

from __future__ import annotations

import argparse
import sys

# a node-label key, as Kueue's schema checks it
_LABEL = (r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
          r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def add_emit_args(p: argparse.ArgumentParser) -> None:
    from exporter._core._settings import Pattern

    # A --level value: a node-label key the nodes carry already (cloud, Topograph or the operator's own).
    label_key = Pattern("a node-label key", _LABEL, 316, bad=("Rack/x", "a/b/c", "-spine", "x/"))
    p.add_argument("--emit", choices=("kueue", "kai", "volcano", "slurm"),
                   help="print what a scheduler reads instead of the report: kueue (a Topology and ResourceFlavor "
                        "per GPU product), kai (KAI Scheduler's Topology per GPU product), volcano (HyperNodes), "
                        "slurm (topology.yaml: blocks, and a tree with --level); exit 4 for slurm where no NVLink "
                        "domain holds two nodes")
    p.add_argument("--level", action="append", type=label_key, metavar="LABEL",
                   help="a fabric label the nodes already carry, to sit above topolink's levels (repeat, highest "
                        "first; e.g. fabric.topograph.run/tier-2)")
    p.add_argument("--slurm-node-label", type=label_key, default="kubernetes.io/hostname", metavar="LABEL",
                   help="with --emit slurm: the node label whose value is the node's Slurm name (default "
                        "kubernetes.io/hostname; Slinky names Slurm nodes by their slurmd pods: label the nodes "
                        "with it)")


def run_emit(args: argparse.Namespace) -> int:
    """0 printed; 1 an API request failed; 2 no readable kubeconfig; 3 the --from file cannot be read; 4 Slurm:
    no NVLink domain holds two nodes."""
    from exporter import UnsafeFile, read_regular
    from exporter.kube import (
        MAX_SAVED_BYTES,
        BadConfig,
        InvalidObject,
        LightkubeApi,
        NoBlocks,
        PublishError,
        SavedApi,
        emit_text,
        read_node_labels,
    )

    if args.gpus is not None or args.format != "table":
        print("topolink cluster: --emit prints the scheduler's objects: --gpus and --format do not apply",
              file=sys.stderr)
        return 2
    if args.label_prefix.startswith("topology.kubernetes.io"):
        print("topolink cluster: topology.kubernetes.io/ is reserved to Kubernetes: topolink invents no level there",
              file=sys.stderr)
        return 2
    try:
        if args.from_file is not None:
            path = args.from_file
            data = sys.stdin.buffer.read(MAX_SAVED_BYTES + 1) if path == "-" else read_regular(path, MAX_SAVED_BYTES)
            if len(data) > MAX_SAVED_BYTES:
                raise ValueError(f"{path}: larger than the {MAX_SAVED_BYTES} bytes allowed: not read")
            api: SavedApi | LightkubeApi = SavedApi(data, "standard input" if path == "-" else path)
        else:
            api = LightkubeApi.connect(kubeconfig=args.kubeconfig)
        named = args.level or []
        nodes = read_node_labels(api, prefix=args.label_prefix, named=[*named, args.slurm_node_label],
                                 limit=args.page_size)
        sys.stdout.write(emit_text(args.emit, nodes, named, args.label_prefix, node_label=args.slurm_node_label))
    except NoBlocks as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return 4
    except OSError as exc:
        print(f"topolink cluster: {args.from_file}: {exc.strerror or exc}", file=sys.stderr)
        return 3
    except (ValueError, UnsafeFile, InvalidObject) as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return 3 if args.from_file is not None else 1
    except BadConfig as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return 2
    except PublishError as exc:
        print(f"topolink cluster: {exc}", file=sys.stderr)
        return 1
    return 0
