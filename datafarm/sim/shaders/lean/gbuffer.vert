#version 450
// DataFarm's lean camera shader, vertex stage: view-space position and normal, entity id.

layout(set = 0, binding = 0) uniform CameraBuffer {
  mat4 viewMatrix;
  mat4 projectionMatrix;
  mat4 viewMatrixInverse;
  mat4 projectionMatrixInverse;
  float width;
  float height;
} cameraBuffer;

layout(set = 1, binding = 0) uniform ObjectTransformBuffer {
  mat4 modelMatrix;
} objectTransformBuffer;

layout(set = 1, binding = 1) uniform ObjectDataBuffer {
  uvec4 segmentation;
  float transparency;
  int shadeFlat;
} objectDataBuffer;

layout(location = 0) in vec3 position;
layout(location = 1) in vec3 normal;
layout(location = 2) in vec2 uv;
layout(location = 3) in vec3 tangent;
layout(location = 4) in vec3 bitangent;

layout(location = 0) out vec4 outPosition;
layout(location = 1) out vec2 outUV;
layout(location = 2) out flat uvec4 outSegmentation;
layout(location = 3) out vec3 outNormal;

void main() {
  mat4 modelView = cameraBuffer.viewMatrix * objectTransformBuffer.modelMatrix;
  outPosition = modelView * vec4(position, 1);
  outUV = uv;
  outSegmentation = objectDataBuffer.segmentation;
  outNormal = mat3(transpose(inverse(modelView))) * normal;
  gl_Position = cameraBuffer.projectionMatrix * outPosition;
}
