"""Generate the arm's URDF from its typed model (configs/robot/*.yaml).

Shapes in the model are given SAPIEN-style (cylinders and capsules along their local x); URDF
cylinders run along z, so each is turned by +90 deg about y on the way out.
"""

from __future__ import annotations

import numpy as np
from xml.etree import ElementTree as ET

from datafarm.geometry import matrix_to_rpy, rpy_to_matrix
from datafarm.robot.config import ArmModel, ShapeSpec

_X_TO_Z = rpy_to_matrix((0.0, np.pi / 2, 0.0))


def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def _shape_origin(shape: ShapeSpec) -> tuple[np.ndarray, np.ndarray]:
    rot = rpy_to_matrix(shape.rpy)
    if shape.kind != "box":
        rot = rot @ _X_TO_Z
    return np.asarray(shape.xyz), matrix_to_rpy(rot)


def _geometry(parent: ET.Element, shape: ShapeSpec) -> None:
    geometry = ET.SubElement(parent, "geometry")
    if shape.kind == "box":
        ET.SubElement(geometry, "box", size=_fmt(2 * np.asarray(shape.half_size)))
    else:
        length = 2 * shape.half_length
        ET.SubElement(geometry, shape.kind, radius=f"{shape.radius:.6g}", length=f"{length:.6g}")


def _inertia(shape: ShapeSpec | None, mass: float) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal inertia of a solid primitive (in the URDF shape frame) and that frame's pose."""
    if shape is None:  # a link with no geometry: a small solid sphere
        i = 0.4 * mass * 0.01**2
        return np.array([i, i, i]), np.zeros(6)
    if shape.kind == "box":
        a, b, c = 2 * np.asarray(shape.half_size)
        diag = mass / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    else:  # along the URDF shape's z
        r, length = shape.radius, 2 * shape.half_length
        side = mass * (3 * r * r + length * length) / 12.0
        diag = np.array([side, side, 0.5 * mass * r * r])
    xyz, rpy = _shape_origin(shape)
    return diag, np.concatenate([xyz, rpy])


def arm_urdf(model: ArmModel, prefix: str = "") -> str:
    """URDF text of one arm; link and joint names get `prefix` (e.g. "left_")."""
    robot = ET.Element("robot", name=f"{prefix}{model.name}")
    colors = {"body": model.visual_color, "accent": model.accent_color}
    for key, rgba in colors.items():
        material = ET.SubElement(robot, "material", name=f"{prefix}{key}")
        ET.SubElement(material, "color", rgba=_fmt(rgba))

    for link_name in model.link_names:
        link = ET.SubElement(robot, "link", name=prefix + link_name)
        shapes = model.shapes.get(link_name, ())
        diag, origin = _inertia(shapes[0] if shapes else None, model.links[link_name].mass)
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "origin", xyz=_fmt(origin[:3]), rpy=_fmt(origin[3:]))
        ET.SubElement(inertial, "mass", value=f"{model.links[link_name].mass:.6g}")
        ET.SubElement(
            inertial, "inertia", ixx=f"{diag[0]:.6g}", iyy=f"{diag[1]:.6g}", izz=f"{diag[2]:.6g}",
            ixy="0", ixz="0", iyz="0",
        )
        for shape in shapes:
            xyz, rpy = _shape_origin(shape)
            for tag in ("visual", "collision"):
                element = ET.SubElement(link, tag)
                ET.SubElement(element, "origin", xyz=_fmt(xyz), rpy=_fmt(rpy))
                _geometry(element, shape)
                if tag == "visual":
                    ET.SubElement(element, "material", name=f"{prefix}{shape.color}")

    for spec in model.joints:
        joint = ET.SubElement(robot, "joint", name=prefix + spec.name, type=spec.type)
        ET.SubElement(joint, "parent", link=prefix + spec.parent)
        ET.SubElement(joint, "child", link=prefix + spec.child)
        ET.SubElement(joint, "origin", xyz=_fmt(spec.xyz), rpy=_fmt(spec.rpy))
        if spec.type != "fixed":
            ET.SubElement(joint, "axis", xyz=_fmt(spec.axis))
            velocity = model.max_joint_velocity if spec.type == "revolute" else model.gripper.max_speed
            ET.SubElement(
                joint, "limit", lower=f"{spec.limit[0]:.6g}", upper=f"{spec.limit[1]:.6g}",
                effort=f"{model.drives['arm' if spec.type == 'revolute' else 'finger'].force_limit:.6g}",
                velocity=f"{velocity:.6g}",
            )
    ET.indent(robot)
    return ET.tostring(robot, encoding="unicode")
