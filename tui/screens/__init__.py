"""The app's screens: the modal export screen of the Ranks tab (the tabs themselves are views, in :mod:`tui.tabs`)."""
