/* Vulkan loader and instance: volk's global loader, loaded once per
 * process; the context's own instance- and device-level entry point tables;
 * the instance qattn creates for itself, with the validation layer and its
 * message collector when asked for.
 *
 * No Vulkan entry point is shared between contexts: volk's global loader
 * functions (vkCreateInstance, ...) are loaded once, instance-level ones go
 * into the context's own table (vki) and device-level ones into its
 * VolkDeviceTable (vkd).
 *
 * One VkInstance per process serves every context qattn makes itself
 * without validation: created with the first and kept until the process
 * exits, even when no context uses it. Destroying the last instance lets the
 * Vulkan loader unload the driver, and on the H200 a thread the NVIDIA
 * driver had started then ran on in unmapped code (SIGSEGV with no symbol,
 * docs/runs/h200-s4-5). A context with the validation layer keeps an instance of its own,
 * because a debug messenger hears the whole instance and each context must
 * see only its own messages. Creating and destroying instances and devices
 * is serialised by one process-wide lock (qattn_vk_lifetime_lock): the
 * NVIDIA driver crashed when one thread made or destroyed its instance
 * while another destroyed a device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
static void load_loader(void) { loader_result = volkInitialize(); }

/* volkLoadDeviceTable reads volk's global vkGetDeviceProcAddr; it is set to
 * this context's instance's one and read under this lock only. */
static pthread_mutex_t device_table_lock = PTHREAD_MUTEX_INITIALIZER;

const char *qattn_vk_load_instance_table(qattn_vk *vk, PFN_vkGetInstanceProcAddr gipa) {
    qattn_vk_instance_table *t = &vk->vki;
    memset(t, 0, sizeof *t);
    t->vkGetInstanceProcAddr = gipa;
#define QVK_LOAD(f) t->f = (PFN_##f)gipa(vk->instance, #f)
    QVK_LOAD(vkDestroyInstance);
    QVK_LOAD(vkEnumeratePhysicalDevices);
    QVK_LOAD(vkGetPhysicalDeviceProperties);
    QVK_LOAD(vkGetPhysicalDeviceProperties2);
    QVK_LOAD(vkGetPhysicalDeviceFeatures2);
    QVK_LOAD(vkGetPhysicalDeviceMemoryProperties);
    QVK_LOAD(vkGetPhysicalDeviceQueueFamilyProperties);
    QVK_LOAD(vkEnumerateDeviceExtensionProperties);
    QVK_LOAD(vkCreateDevice);
    QVK_LOAD(vkGetDeviceProcAddr);
    QVK_LOAD(vkCreateDebugUtilsMessengerEXT);
    QVK_LOAD(vkDestroyDebugUtilsMessengerEXT);
    QVK_LOAD(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR);
#undef QVK_LOAD
    if (!t->vkDestroyInstance) return "vkDestroyInstance";
    if (!t->vkEnumeratePhysicalDevices) return "vkEnumeratePhysicalDevices";
    if (!t->vkGetPhysicalDeviceProperties) return "vkGetPhysicalDeviceProperties";
    if (!t->vkGetPhysicalDeviceProperties2) return "vkGetPhysicalDeviceProperties2";
    if (!t->vkGetPhysicalDeviceFeatures2) return "vkGetPhysicalDeviceFeatures2";
    if (!t->vkGetPhysicalDeviceMemoryProperties) return "vkGetPhysicalDeviceMemoryProperties";
    if (!t->vkGetPhysicalDeviceQueueFamilyProperties) return "vkGetPhysicalDeviceQueueFamilyProperties";
    if (!t->vkEnumerateDeviceExtensionProperties) return "vkEnumerateDeviceExtensionProperties";
    if (!t->vkCreateDevice) return "vkCreateDevice";
    if (!t->vkGetDeviceProcAddr) return "vkGetDeviceProcAddr";
    return NULL;
}

void qattn_vk_load_device_table(qattn_vk *vk) {
    pthread_mutex_lock(&device_table_lock);
    PFN_vkGetDeviceProcAddr saved = vkGetDeviceProcAddr;
    vkGetDeviceProcAddr = vk->vki.vkGetDeviceProcAddr;
    volkLoadDeviceTable(&vk->vkd, vk->device);
    vkGetDeviceProcAddr = saved;
    pthread_mutex_unlock(&device_table_lock);
}

static void msg_append(qattn_vk *vk, const char *text) {
    size_t used = strlen(vk->messages);
    if (used + 2 >= sizeof vk->messages) return; /* keep the first ones */
    snprintf(vk->messages + used, sizeof vk->messages - used, "%s%s", used ? "\n" : "", text);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    qattn_vk *vk = (qattn_vk *)user;
    if (!(severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    vk->n_messages++;
    msg_append(vk, data && data->pMessage ? data->pMessage : "(validation message without text)");
    return VK_FALSE;
}

qattn_status qattn_vk_need_loader(char *err, size_t n) {
    pthread_once(&loader_once, load_loader);
    if (loader_result != VK_SUCCESS) {
        snprintf(err, n, "vulkan: no Vulkan loader (libvulkan) found");
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    return QATTN_OK;
}

VkDebugUtilsMessengerCreateInfoEXT qattn_vk_messenger_info(qattn_vk *vk) {
    VkDebugUtilsMessengerCreateInfoEXT mci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = on_debug_message;
    mci.pUserData = vk;
    return mci;
}

static pthread_mutex_t lifetime_lock = PTHREAD_MUTEX_INITIALIZER;
static VkInstance shared_instance;  /* under lifetime_lock */

void qattn_vk_lifetime_lock(void) { pthread_mutex_lock(&lifetime_lock); }
void qattn_vk_lifetime_unlock(void) { pthread_mutex_unlock(&lifetime_lock); }

static int has_layer(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *l = calloc(n, sizeof *l);
    if (!l) return 0;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; ++i) found |= strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

qattn_status qattn_vk_create_instance(qattn_vk *vk, int validation, char *err, size_t n) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "qattn";
    app.pEngineName = "qattn";
    app.apiVersion = VK_API_VERSION_1_3;
    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mci = qattn_vk_messenger_info(vk);
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    if (validation) {
        if (!has_layer(layers[0])) {
            snprintf(err, n, "vulkan: debug_validation asked for but VK_LAYER_KHRONOS_validation is "
                             "not installed");
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = layers;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = exts;
        ci.pNext = &mci; /* also catches messages of instance creation */
    }
    VkResult r = vkCreateInstance(&ci, NULL, &vk->instance);
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: vkCreateInstance failed (%s)", qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    const char *missing = qattn_vk_load_instance_table(vk, vkGetInstanceProcAddr);
    if (missing) {
        snprintf(err, n, "vulkan: the instance has no %s", missing);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    if (validation) {
        if (!vk->vki.vkCreateDebugUtilsMessengerEXT || !vk->vki.vkDestroyDebugUtilsMessengerEXT) {
            snprintf(err, n, "vulkan: the instance has no VK_EXT_debug_utils entry points");
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
        r = vk->vki.vkCreateDebugUtilsMessengerEXT(vk->instance, &mci, NULL, &vk->messenger);
        if (r != VK_SUCCESS) {
            snprintf(err, n, "vulkan: vkCreateDebugUtilsMessengerEXT failed (%s)",
                     qattn_vk_result_name(r));
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
    }
    return QATTN_OK;
}

qattn_status qattn_vk_acquire_instance(qattn_vk *vk, int validation, char *err, size_t n) {
    if (validation) return qattn_vk_create_instance(vk, 1, err, n);
    if (shared_instance == VK_NULL_HANDLE) {
        qattn_status s = qattn_vk_create_instance(vk, 0, err, n);
        if (s != QATTN_OK) return s; /* destroy releases what was made */
        shared_instance = vk->instance;
    } else {
        vk->instance = shared_instance;
        const char *missing = qattn_vk_load_instance_table(vk, vkGetInstanceProcAddr);
        if (missing) { /* it loaded for the first context: cannot happen */
            vk->instance = VK_NULL_HANDLE;
            snprintf(err, n, "vulkan: the instance has no %s", missing);
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
    }
    vk->shared_instance = 1;
    return QATTN_OK;
}

void qattn_vk_release_instance(qattn_vk *vk) {
    if (!vk->instance || vk->imported) return;
    if (vk->shared_instance) {
        /* the instance itself stays: see the top of this file */
    } else if (vk->vki.vkDestroyInstance) {
        vk->vki.vkDestroyInstance(vk->instance, NULL);
    } else { /* made, but its table not loaded */
        PFN_vkDestroyInstance destroy =
            (PFN_vkDestroyInstance)vkGetInstanceProcAddr(vk->instance, "vkDestroyInstance");
        if (destroy) destroy(vk->instance, NULL);
    }
    vk->instance = VK_NULL_HANDLE;
    vk->shared_instance = 0;
}
