"""Recordings of a Host: what it was asked and answered, kept to be answered again anywhere
(docs/snapshot-format.md). Import the module that holds a name; this package re-exports none.

model.py     the recording in memory, the schema name, BundleLimits
recorder.py  RecordingHost: forwards every question to a Host and keeps question and answer
writer.py    a recording to a snapshot directory or a .tar.gz bundle
reader.py    a snapshot directory or bundle to a recording (hostile input, checked member by
             member)
snapshot.py  SnapshotHost: answers what a recording holds, "not recorded" for the rest
overlay.py   ModelOverlay: a replay's --model directory read from this machine
"""
