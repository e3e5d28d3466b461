"""``python -m lane_pg <command> ...``: see ``lane_pg.cli``."""

from lane_pg.cli import console_main

if __name__ == "__main__":
    console_main()
