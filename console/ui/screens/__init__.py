"""Screens pushed over the console's main screen: doctor, playbooks, help."""

from __future__ import annotations

from console.ui.screens.doctor import DoctorScreen
from console.ui.screens.help import HelpScreen
from console.ui.screens.playbook import PlaybookBrowser, PlaybookScreen

__all__ = ["DoctorScreen", "HelpScreen", "PlaybookBrowser", "PlaybookScreen"]
