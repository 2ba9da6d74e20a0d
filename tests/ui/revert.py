"""Reverts one session's turn from `ckpt ui` in headless Chromium, as a user would: the turn's
steps shown with its prompt, a plan that changes nothing, the revert that leaves the other
session's file and the user's line alone, and its undo.

Usage: revert.py URL PROJECT
The project: session A's turn "A writes a.txt" wrote a.txt and line 2 of shared.txt (two
steps); the user then changed line 5; session B's turn wrote b.txt.
"""

import os
import sys
import time

from page import start, testid, wait, entry_labelled

URL, PROJECT = sys.argv[1:3]


def read(rel):
    path = os.path.join(PROJECT, rel)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def snapshot():
    return {rel: read(rel) for rel in ("a.txt", "b.txt", "shared.txt")}


driver = start()
try:
    driver.get(URL)
    wait(driver, lambda d: entry_labelled(d, "A writes a.txt")).click()
    # The turn's steps, with the tools and the files they named; steps are not timeline rows.
    steps = wait(driver, lambda d: testid(d, "steps"))
    wait(driver, lambda d: "Write — a.txt" in steps.text and "Edit — shared.txt" in steps.text)
    assert "the turn ended" in steps.text, steps.text
    assert entry_labelled(driver, "(step)") is None

    before = snapshot()
    testid(driver, "revert").click()
    plan = wait(driver, lambda d: testid(d, "plan"))
    wait(driver, lambda d: "a.txt" in plan.text and "shared.txt" in plan.text)
    assert "b.txt" not in plan.text, plan.text
    time.sleep(0.5)
    assert snapshot() == before, "the plan changed files"

    testid(driver, "confirm").click()
    done = wait(driver, lambda d: testid(d, "reverted"))
    assert "Took back 2 file(s)" in done.text, done.text
    after = snapshot()
    assert after["a.txt"] is None, after
    assert after["b.txt"] == "from B\n", after
    assert after["shared.txt"] == "1\n2\n3\n4\nfive (user)\n", after

    testid(driver, "undo").click()
    wait(driver, lambda d: testid(d, "undone"))
    assert snapshot() == before, "the undo did not bring the files back"
    print("revert from the page: steps shown; plan, confirm and undo exact")
finally:
    driver.quit()
