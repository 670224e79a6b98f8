"""Prisma's entrypoint: routes to the pages (ui/navigation.py) and draws the shared sidebar."""

from ui import navigation

navigation.run()
