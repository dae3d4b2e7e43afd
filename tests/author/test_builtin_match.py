import pytest

from datafarm.author import BuiltinAuthor, RequestRefused
from datafarm.library import BUILTIN_TASKS

PARAPHRASES = {
    "nest_cups": [
        "Nest the three cups, one inside the next.",
        "stack the cups into each other",
        "Put the small cup in the medium cup and the medium one inside the big cup",
        "nest the mugs",
        "place the cups one into the next so they nest",
    ],
    "apple_on_scale": [
        "Place the apple on the scale.",
        "weigh the apple",
        "put the fruit onto the weighing plate",
        "Move the apple onto the kitchen scale please",
        "set the apple down on the balance",
    ],
    "strike_drum": [
        "Strike the drum at least twice.",
        "hit the drum two times",
        "beat the drum",
        "play the snare a couple of times",
        "tap on the drum twice with the gripper",
    ],
    "block_in_drawer": [
        "Place the block in the drawer and close it.",
        "put the cube into the drawer, then shut the drawer",
        "drop the brick in the open drawer and push it closed",
        "Store the block in the drawer and close the drawer",
        "move the block into the drawer and slide in the drawer to close",
    ],
    "fold_towel": [
        "Fold the towel twice.",
        "fold the cloth in half and then in half again",
        "fold up the napkin",
        "please fold the tea towel into quarters",
        "double over the rag twice (fold it)",
    ],
    "lift_cone": [
        "Lift the traffic cone off the table.",
        "pick up the cone",
        "raise the orange cones up",
        "grab the pylon and hold it up",
        "please grasp the traffic cone and lift it",
    ],
    "lift_brick": [
        "Lift the brick off the table.",
        "pick the heavy brick up",
        "raise the brick a few centimetres",
        "grab the brick and hoist it",
        "take the red brick up off the table",
    ],
    "lift_teapot": [
        "Lift the teapot by its handle.",
        "pick up the teapot by the handle",
        "grab the tea pot's handle and raise it",
        "hold the kettle by its handle and lift it off the table",
        "raise the teapot using its handle",
    ],
    "pick_screw": [
        "Pick up the screw.",
        "lift the screw off the table",
        "grab the little screw and hold it up",
        "please pick the bolt up",
        "grasp the screws lying on the table and raise it",
    ],
    "screw_in_basket": [
        "Put the screw into the basket.",
        "drop the screw in the basket",
        "place a screw into the tray",
        "move the bolt over to the basket and let go of it inside",
        "put the screw away in the bin",
    ],
    "nut_on_plate": [
        "Put the nut on the plate.",
        "place the hex nut onto the plate",
        "set the nut down on the dish",
        "move the nuts onto the saucer",
        "lay the nut flat on the plate please",
    ],
    "stack_bowls": [
        "Stack the small bowl into the big bowl.",
        "stack the bowls",
        "nest the two bowls",
        "put one bowl inside the other",
        "place the small bowl in the big one",
    ],
}

UNRELATED = [
    "pour water into the glass",
    "open the door",
    "wipe the table with a towel",
    "sort the screws by size",
    "open the drawer",
]


@pytest.fixture(scope="module")
def author():
    return BuiltinAuthor()


def test_every_task_has_paraphrases():
    assert set(PARAPHRASES) == set(BUILTIN_TASKS)


@pytest.mark.parametrize("task,request_text", [(t, r) for t, rs in PARAPHRASES.items() for r in rs])
def test_paraphrases_match_their_task(author, task, request_text):
    assert author.match(request_text).task == task


@pytest.mark.parametrize("request_text", UNRELATED)
def test_unrelated_requests_are_refused_with_the_menu_and_the_way_out(author, request_text):
    with pytest.raises(RequestRefused) as refusal:
        author.match(request_text)
    message = str(refusal.value)
    assert all(name in message for name in BUILTIN_TASKS)
    assert "litellm" in message and "bindings.json" in message


def test_empty_request_is_refused(author):
    with pytest.raises(RequestRefused, match="empty"):
        author.match("   ")


def test_package_is_written_for_a_match(author, tmp_path):
    match = author.match("weigh the apple")
    folder = author.write_package(match, tmp_path / "pkg")
    assert {"task.yaml", "scene.yaml", "params.yaml", "expert.py", "judge.py"} <= {p.name for p in folder.iterdir()}
