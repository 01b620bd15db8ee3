"""The pinned llm-d router's own code on the rendered EndpointPickerConfigs (`make check-router`)."""
