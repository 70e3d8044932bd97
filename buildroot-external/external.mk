include $(sort $(wildcard $(BR2_EXTERNAL_KPROF_PATH)/package/*/*.mk))
