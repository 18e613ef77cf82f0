"""Screens pushed over the console's main screen: doctor, playbooks, help."""

from __future__ import annotations

from console.screens.doctor import DoctorScreen
from console.screens.help import HelpScreen
from console.screens.playbook import PlaybookBrowser, PlaybookScreen

__all__ = ["DoctorScreen", "HelpScreen", "PlaybookBrowser", "PlaybookScreen"]
