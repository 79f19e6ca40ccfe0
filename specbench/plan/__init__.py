"""From the config to what will be sent: sweep points and the exact requests of every window (the same for
every variant), the prompt sets, arrival schedules, natural lengths, and the drafter protocol.
"""
