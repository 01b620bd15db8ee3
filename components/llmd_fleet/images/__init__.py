"""Serving images (type token `llmd-fleet:images:ImageBuild`): pinned upstream or built from images/."""
