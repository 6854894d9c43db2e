package io.tablecdc.common;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Optional;

/**
 * The names of a Postgres pipeline flow's replication slots, from its main slot ({@code <slot.prefix>_<16 hex>},
 * recorded in the catalog's {@code cdc_flow.source_slot}): its copy slots and its private (detach) slots share a prefix
 * of their own, made from the main slot's name, so that no other flow's slots share it.
 */
public final class FlowSlots {
    private FlowSlots() {
    }

    /** {@code <slot.prefix>_copy_<8 hex of the main slot's hash>_}: the flow's copy slots, and only them. */
    public static String copySlotPrefix(String slotPrefix, String mainSlot) {
        return slotPrefix + "_copy_" + mainSlotHash(mainSlot) + "_";
    }

    /** {@code <slot.prefix>_detach_<8 hex of the main slot's hash>_}: the flow's private slots, and only them. */
    public static String detachSlotPrefix(String slotPrefix, String mainSlot) {
        return slotPrefix + "_detach_" + mainSlotHash(mainSlot) + "_";
    }

    /** The {@code slot.prefix} a main slot was named with, or empty when the name is not shaped like a main slot's. */
    public static Optional<String> slotPrefixOf(String mainSlot) {
        return mainSlot != null && mainSlot.matches(".+_[0-9a-f]{16}")
                ? Optional.of(mainSlot.substring(0, mainSlot.length() - 17)) : Optional.empty();
    }

    private static String mainSlotHash(String mainSlot) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(mainSlot.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(hash, 0, 4);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
