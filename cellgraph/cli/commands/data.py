"""``cellgraph data``: download the data sets (``fetch``) and show where they are (``list``)."""

from __future__ import annotations

import argparse

def register(sub: argparse._SubParsersAction) -> None:
    from cellgraph.data.datadir import DATA_DIR_HELP
    from cellgraph.data.fetch import DATA_URL_ENV, SOURCES

    p = sub.add_parser(
        "data",
        help="download the data sets (wiki, ptb, sst, glove) and show where they are",
        description="fetch downloads data sets from their pinned public sources into the cache folder "
        "($CELLGRAPH_DATA, else ~/.cache/cellgraph), checks every file's sha256 and resumes an interrupted "
        "download; list shows, per data set, whether the loaders find it, where, and whether its files have "
        "the pinned sha256.",
        epilog="examples: cellgraph data fetch wiki ptb sst glove; cellgraph data list",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="download data sets (skips files already there)",
                               description="Download the files of each NAME with sha256 checks.")
    fetch.add_argument("names", nargs="+", choices=tuple(SOURCES), metavar="NAME",
                       help=f"data set: {', '.join(SOURCES)}")
    fetch.add_argument("--data", metavar="DIR", default=None,
                       help="where to store the files (default: $CELLGRAPH_DATA, else ~/.cache/cellgraph)")
    fetch.add_argument("--url", metavar="BASE", default=None,
                       help=f"fetch from a mirror laid out like a data folder, BASE/ptb/ptb.train.txt "
                       f"(default: ${DATA_URL_ENV}, else the pinned public sources)")
    fetch.set_defaults(func=run_fetch)
    listing = actions.add_parser("list", help="show each data set: present or not, where, checksums",
                                 description="Show where the loaders find each data set and check its sha256s.")
    listing.add_argument("--data", metavar="DIR", default=None, help=DATA_DIR_HELP)
    listing.set_defaults(func=run_list)


def run_fetch(args: argparse.Namespace) -> int:
    from cellgraph.data.fetch import fetch

    for name in dict.fromkeys(args.names):
        for path, downloaded in fetch(name, args.data, args.url):
            print(f"{name}: {path} {'downloaded' if downloaded else 'already there'}, sha256 ok")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from cellgraph.data.fetch import inventory

    for found in inventory(args.data):
        where = f"{found.folder} ({found.how})" if found.folder else found.how
        print(f"{found.name:6s} {found.state:10s} {where}")
        for path, state in found.files:
            shown = path.relative_to(found.folder) if path.is_relative_to(found.folder) else path
            print(f"         {str(shown):36s} {path.stat().st_size:>11,} bytes  sha256 {state}")
    return 0
